#!/usr/bin/env python3
"""megatron-core's GPTModel trained on packed documents, every microbatch
padded to static shapes by thdc: a loop in the shape of Megatron-LM's
examples/run_simple_mcore_train_loop.py, on one GPU.

    python3 examples/megatron/simple_train_loop.py --iterations 20

Each global batch is documents of varying length, packed next-fit into
microbatches of at most C rows and N - 1 documents (thdc.planner, the
packing of megatron-core's sequence-packing scheduler); each microbatch is
the batch dict that scheduler yields. forward_step calls thdc.megatron's
get_batch_on_this_rank_for_sequence_packing where Megatron-LM's
pretrain_gpt.py calls megatron-core's function of that name: one kernel
pads the microbatch to C rows and N + 1 offsets without synchronising the
host, so the model meets one shape every microbatch. README.md says what it
needs and how the same runs in Megatron-LM's own trainer.
"""
import argparse
import os
from functools import partial

import numpy as np

import thdc.planner


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--documents", type=int, default=16, help="per global batch")
    parser.add_argument("--C", type=int, default=4096,
                        help="rows per microbatch (Megatron's --max-seqlen-per-dp-cp-rank)")
    parser.add_argument("--N", type=int, default=16, help="sequences per microbatch, the "
                        "dummy included (Megatron's --thd-max-packed-sequences)")
    parser.add_argument("--vocab", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.documents < 1 or args.C < 16 or args.N < 2:
        parser.error("--iterations and --documents must be >= 1, --C >= 16, --N >= 2")
    return args


def global_batch(rng, documents, C, N, vocab, device="cuda"):
    """One global batch as the packed microbatches' batch dicts. A document
    counts through the vocabulary from a random start by a random stride, so
    its next token is learnable once attention stays inside the document."""
    import torch

    lengths = rng.integers(16, C + 1, size=documents)
    starts = rng.integers(0, vocab, size=documents)
    strides = rng.integers(1, 8, size=documents)
    microbatches = []
    for pack in thdc.planner.plan(lengths, C, 1, max_packed_sequences=N).packs:
        counts = [np.arange(lengths[d] + 1) * strides[d] + starts[d] for d in pack]
        cu_seqlens = np.concatenate([[0], np.cumsum(lengths[pack])]).astype(np.int32)
        arrays = {
            "tokens": np.concatenate([c[:-1] for c in counts]) % vocab,
            "labels": np.concatenate([c[1:] for c in counts]) % vocab,
            "loss_mask": np.ones(cu_seqlens[-1], np.float32),
            "position_ids": np.concatenate([np.arange(lengths[d]) for d in pack]),
            "cu_seqlens": cu_seqlens,
            "cu_seqlens_padded": cu_seqlens,  # cp = 1: no document is padded
        }
        batch = {k: torch.from_numpy(v).to(device) for k, v in arrays.items()}
        batch["max_seqlen"] = int(lengths[pack].max())  # a host int, as megatron-core's
        microbatches.append(batch)
    return microbatches


def initialize_distributed(seed):
    """One process: torch.distributed over NCCL, megatron-core's groups with
    TP = PP = CP = 1, and its RNG states."""
    import torch
    from megatron.core import parallel_state
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    torch.distributed.init_process_group("nccl", rank=0, world_size=1)
    parallel_state.initialize_model_parallel(1, 1)
    model_parallel_cuda_manual_seed(seed)


def thd_fields(args):
    """The config fields thdc's function reads, as megatron-core's own does
    in graph mode: every microbatch padded to C rows and N + 1 offsets."""
    return dict(max_seqlen_per_dp_cp_rank=args.C, thd_max_packed_sequences=args.N,
                pad_packed_seq_alignment="max")


def model_provider(args):
    """A small GPTModel with TransformerEngine's layers, wrapped in DDP, and
    megatron-core's Adam."""
    import torch
    from megatron.core.distributed import (DistributedDataParallel,
                                           DistributedDataParallelConfig, finalize_model_grads)
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_with_transformer_engine_spec
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.transformer_config import TransformerConfig

    config = TransformerConfig(
        num_layers=2, hidden_size=256, num_attention_heads=4, add_bias_linear=False,
        hidden_dropout=0.0, attention_dropout=0.0, bf16=True, params_dtype=torch.bfloat16,
        pipeline_dtype=torch.bfloat16, variable_seq_lengths=True, apply_rope_fusion=True,
        calculate_per_token_loss=True,  # each microbatch's loss a sum; gradients per token
        **thd_fields(args))
    model = GPTModel(config=config, vocab_size=args.vocab, max_sequence_length=args.C,
                     transformer_layer_spec=get_gpt_layer_with_transformer_engine_spec(),
                     position_embedding_type="rope").cuda()
    ddp_config = DistributedDataParallelConfig(grad_reduce_in_fp32=True,
                                               use_distributed_optimizer=False)
    model = DistributedDataParallel(config=config, ddp_config=ddp_config, module=model)
    config.finalize_model_grads_func = finalize_model_grads  # divides by the tokens
    optimizer = get_megatron_optimizer(
        OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True, params_dtype=torch.bfloat16,
                        clip_grad=0.0, use_distributed_optimizer=False), [model])
    return model, optimizer, config


def loss_func(loss_mask, output_tensor):
    """The microbatch's summed loss, its loss tokens, and [sum, tokens] to
    report (pretrain_gpt.py's loss with calculate_per_token_loss)."""
    import torch

    mask = loss_mask.view(-1).float()
    loss = torch.sum(output_tensor.view(-1).float() * mask)
    return loss, mask.sum().to(torch.int), {"lm loss": torch.stack([loss.detach(), mask.sum()])}


def forward_step(config, data_iterator, model):
    """pretrain_gpt.py's forward_step on its packing path, with thdc's
    function in place of megatron-core's: the same arguments, the same
    7-tuple, every tensor [1, C] and PackedSeqParams of N + 1 offsets."""
    from thdc.megatron import get_batch_on_this_rank_for_sequence_packing

    tokens, labels, loss_mask, attention_mask, position_ids, packed_seq_params, padding_mask = \
        get_batch_on_this_rank_for_sequence_packing(
            data_iterator, vpp_size=None, mtp_on_this_rank=False, vp_stage=None,
            dynamic_cp=False, config=config)
    output = model(tokens, position_ids, attention_mask, labels=labels, loss_mask=loss_mask,
                   packed_seq_params=packed_seq_params, padding_mask=padding_mask)
    return output, partial(loss_func, loss_mask)


def main(argv=None):
    args = parse_args(argv)
    import torch
    from megatron.core.pipeline_parallel import get_forward_backward_func

    initialize_distributed(args.seed)
    model, optimizer, config = model_provider(args)
    forward_backward = get_forward_backward_func()
    rng = np.random.default_rng(args.seed)
    for iteration in range(args.iterations):
        microbatches = global_batch(rng, args.documents, args.C, args.N, args.vocab)
        model.zero_grad_buffer()
        optimizer.zero_grad()
        reports = forward_backward(
            forward_step_func=partial(forward_step, config), data_iterator=iter(microbatches),
            model=[model], num_microbatches=len(microbatches), seq_length=args.C,
            micro_batch_size=1, forward_only=False)
        optimizer.step()
        loss, tokens = torch.stack([r["lm loss"] for r in reports]).sum(0).tolist()
        print(f"iteration {iteration}: {len(microbatches)} microbatches, {int(tokens)} tokens, "
              f"loss {loss / tokens:.4f}", flush=True)
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
