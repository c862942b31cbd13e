"""megatron-core's model, DDP wrapper and optimizer, set up as
megatron/training/training.py does for one GPU (world size 1, NCCL), from
megatron-core `dev` d48bd6be0a. Needs TransformerEngine and a GPU.

Sources (file:line on dev):
- GPTModel: megatron/core/models/gpt/gpt_model.py; the TE layer spec:
  get_gpt_layer_with_transformer_engine_spec, models/gpt/gpt_layer_specs.py.
- DDP: megatron/core/distributed/distributed_data_parallel.py:44 (config,
  ddp_config, module); training.py wraps on a side stream (training.py
  ~:2280-2300) "for cuda graph capture support with DDP"; done here too.
- Optimizer: get_megatron_optimizer(config, model_chunks),
  megatron/core/optimizer/__init__.py:975; OptimizerConfig fields as
  get_megatron_optimizer_config (training.py) copies them from args.
- The THD graph fields: max_seqlen_per_dp_cp_rank, thd_max_packed_sequences,
  pad_packed_seq_alignment (model_parallel_config.py:74-120, checked at
  :525-550), and transformer_config.py:3640-3655 (graph mode needs N and the
  alignment 'max' or C). Layers treat THD as graphed only when
  sequence_packing_scheduler is set and cuda_graph_impl != "none"
  (_is_thd_cuda_graph, transformer/module.py:277-282), so the graph modes set
  sequence_packing_scheduler="dp_balanced" (its only use here).
- calculate_per_token_loss=True: the schedule leaves each microbatch's loss
  a sum (schedules.py:329-333) and finalize_model_grads divides the
  gradients by the global batch's token count (schedules.py:812-819): the
  per-token mean over however the planner cut the batch, as examples/train.
"""
import os

import torch


def initialize_distributed(seed):
    """World size 1 over NCCL, TP = PP = 1, TE's RNG tracker, and the
    microbatch calculator TECudaGraphHelper reads (cuda_graphs.py:2510-2514
    calls get_num_microbatches())."""
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

    if not torch.distributed.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29517")
        torch.cuda.set_device(0)
        torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(seed, te_rng_tracker=True)


def init_microbatch_calculator(max_microbatches):
    from megatron.core import num_microbatches_calculator as nmc

    if nmc._GLOBAL_NUM_MICROBATCHES_CALCULATOR is None:
        nmc.init_num_microbatches_calculator(rank=0, rampup_batch_size=None,
                                             global_batch_size=max_microbatches,
                                             micro_batch_size=1, data_parallel_size=1)


def transformer_config(preset, C, N, graphs):
    """TransformerConfig for the preset; graphs True: the per-layer TE graph
    fields (C rows, N sequences, alignment 'max'); "full_iteration":
    cuda_graph_impl "full_iteration" (the whole forward and backward in one
    graph: the model's own code then avoids host reads where it has a choice,
    e.g. TE's cross entropy, language_module.py:158-177); else the eager
    config with no packed-sequence padding (pad_packed_seq_alignment None:
    dev's function then pads nothing, data_schedule.py:639-651)."""
    from megatron.core.transformer.transformer_config import TransformerConfig

    kwargs = dict(
        num_layers=preset.layers, hidden_size=preset.hidden,
        num_attention_heads=preset.heads, ffn_hidden_size=4 * preset.hidden,
        add_bias_linear=False, hidden_dropout=0.0, attention_dropout=0.0,
        bf16=True, params_dtype=torch.bfloat16, pipeline_dtype=torch.bfloat16,
        tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
        context_parallel_size=1, sequence_parallel=False,
        calculate_per_token_loss=True, variable_seq_lengths=True,
        gradient_accumulation_fusion=False, masked_softmax_fusion=True,
        bias_dropout_fusion=True, apply_rope_fusion=True,
        # TE's RNG tracker in every mode: the graph modes need it (TE's
        # make_graphed_callables saves and restores graph-safe generator
        # states; training.py turns it on for CUDA graphs, arguments.py:2146-2153),
        # and every mode starts from the same RNG state.
        use_te_rng_tracker=True,
    )
    if graphs == "full_iteration":
        kwargs.update(cuda_graph_impl="full_iteration")
    elif graphs:
        kwargs.update(cuda_graph_impl="transformer_engine", cuda_graph_warmup_steps=0,
                      sequence_packing_scheduler="dp_balanced",
                      pad_packed_seq_alignment="max", max_seqlen_per_dp_cp_rank=C,
                      thd_max_packed_sequences=N)
    return TransformerConfig(**kwargs)


def build_gpt(config, preset, C):
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec
    from megatron.core.models.gpt.gpt_model import GPTModel

    model = GPTModel(config=config,
                     transformer_layer_spec=get_gpt_layer_with_transformer_engine_spec(),
                     vocab_size=preset.vocab, max_sequence_length=C, pre_process=True,
                     post_process=True, share_embeddings_and_output_weights=False,
                     position_embedding_type="rope")
    return model.cuda()


def initial_state(config, preset, C, seed):
    """The initial weights, made once per model size (on the CPU, cloned):
    every mode loads them."""
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

    torch.manual_seed(seed)
    model_parallel_cuda_manual_seed(seed, te_rng_tracker=True)
    model = build_gpt(config, preset, C)
    state = {k: (v.detach().cpu().clone() if torch.is_tensor(v) else v)
             for k, v in model.state_dict().items()}
    del model
    return state


def build_training(config, preset, C, state, seed, optimizer_graph=False):
    """GPTModel loaded with `state`, wrapped in DDP, and Megatron's optimizer;
    config.finalize_model_grads_func set as training.py does. optimizer_graph:
    OptimizerConfig.optimizer_cuda_graph, which makes Adam capturable (its
    step count and learning rate on the device, optimizer/__init__.py:552)
    for megatron-core's OptimizerCudaGraphWrapper."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.distributed import finalize_model_grads
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

    torch.manual_seed(seed)
    model_parallel_cuda_manual_seed(seed, te_rng_tracker=True)
    model = build_gpt(config, preset, C)
    model.load_state_dict(state, strict=True)
    ddp_config = DistributedDataParallelConfig(grad_reduce_in_fp32=True,
                                               overlap_grad_reduce=False,
                                               use_distributed_optimizer=False,
                                               check_for_nan_in_grad=False)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ddp = DistributedDataParallel(config=config, ddp_config=ddp_config, module=model)
    torch.cuda.current_stream().wait_stream(side)
    # clip_grad 0: clipping reads the norm back to the host every step
    # (optimizer.py:1378-1379 -> clip_grad_norm), a synchronisation that is
    # the optimizer's, not the data path's.
    opt_config = OptimizerConfig(optimizer="adam", lr=preset.lr, min_lr=preset.lr,
                                 weight_decay=0.1, adam_beta1=0.9, adam_beta2=0.95,
                                 bf16=True, params_dtype=torch.bfloat16, clip_grad=0.0,
                                 use_distributed_optimizer=False,
                                 optimizer_cuda_graph=optimizer_graph)
    optimizer = get_megatron_optimizer(opt_config, [ddp])
    config.finalize_model_grads_func = finalize_model_grads
    config.no_sync_func = ddp.no_sync
    return ddp, optimizer
