from . import f  # the face: a defect
