//===- InputFile.cpp - bounded reads of the tools' input files ------------===//

#include "compiler/InputFile.h"

#include "llvm/Support/FormatVariadic.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {
llvm::Error inputError(const std::string &message) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 message.c_str());
}

std::string sizeText(size_t bytes) {
  return bytes >= (size_t(1) << 20)
             ? std::to_string(bytes >> 20) + " MiB"
             : std::to_string(bytes) + " bytes";
}
} // namespace

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
thdc::readInputFile(llvm::StringRef path, size_t maxBytes) {
  bool standardInput = path == "-";
  std::string name = standardInput ? "<stdin>" : path.str();
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is cleared
  // once open, so that reads wait for data); O_NOCTTY: a terminal named as
  // the input does not become the process's controlling terminal.
  int fd = standardInput
               ? STDIN_FILENO
               : open(path.str().c_str(),
                      O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int error = errno;
    return llvm::createStringError(
        std::error_code(error, std::generic_category()), "%s",
        llvm::formatv("cannot open '{0}': {1}", name, std::strerror(error))
            .str()
            .c_str());
  }
  auto closeFile = [&] {
    if (!standardInput)
      close(fd);
  };
  struct stat info;
  if (fstat(fd, &info) != 0) {
    std::string message = std::strerror(errno);
    closeFile();
    return inputError(llvm::formatv("cannot read '{0}': {1}", name, message));
  }
  bool regular = S_ISREG(info.st_mode);
  bool stream = S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode) ||
                (S_ISCHR(info.st_mode) && isatty(fd));
  if (!standardInput)
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  if (!regular && !stream) {
    closeFile();
    return inputError(llvm::formatv(
        "'{0}' is not a regular file ({1}); give a file, or pipe the text "
        "into standard input",
        name,
        S_ISDIR(info.st_mode)   ? "a folder"
        : S_ISCHR(info.st_mode) ? "a character device"
        : S_ISBLK(info.st_mode) ? "a block device"
                                : "not a file"));
  }
  auto tooLarge = [&] {
    closeFile();
    return inputError(llvm::formatv(
        "'{0}' is larger than {1}, the most thdc reads as this input", name,
        sizeText(maxBytes)));
  };
  if (regular && size_t(info.st_size) > maxBytes)
    return tooLarge();
  std::string bytes;
  char chunk[1 << 16];
  while (true) {
    ssize_t got = read(fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0) {
      std::string message = std::strerror(errno);
      closeFile();
      return inputError(
          llvm::formatv("cannot read '{0}': {1}", name, message));
    }
    if (got == 0)
      break;
    if (bytes.size() + size_t(got) > maxBytes)
      return tooLarge();
    bytes.append(chunk, size_t(got));
  }
  closeFile();
  return llvm::MemoryBuffer::getMemBufferCopy(bytes, name);
}
