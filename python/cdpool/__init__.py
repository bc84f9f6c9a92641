"""cdpool: the central data pool and cdp-train's checkpoints from Python.

    Pool(path)               a pool (cdp-pool(5)): meta, statistics, records
    read_keys(path, pool=)   a pointer file (cdp-keys(5))
    load_checkpoint(path)    a checkpoint (cdp-checkpoint(5))
    BlockSampler, PoolDataset
                             cdp-train's order and samples for
                             torch.utils.data (torch itself is optional)
    cdpool.cfg, cdpool.model the model cfg language (cdp-model(5)): parse(text),
                             build(text), model_of(ckpt)
    cdpool.torch_model       the PyTorch twin of the engine's models, to_torch(ckpt),
                             export_onnx(ckpt, path)
    cdpool.trace             a cdp-train --trace timeline: Trace(path), summarize()
    python -m cdpool info POOL|CHECKPOINT|KEYS
    python -m cdpool trace [--skip N] [--against BASE] TRACE

Every reader checks what the C readers check (magic, version, sizes, CRCs)
and raises CdpError with the C library's code and phrase.
"""
from .checkpoint import Checkpoint, decode_checkpoint, load_checkpoint
from .data import Augment, BlockSampler, Mix, PoolDataset, steps_per_epoch
from .errors import CdpError
from .keys import KeyList, read_keys, split_key
from .pool import Pool
from .record import Record, decode as decode_record
from .rng import Rng, derive, epoch_order

__version__ = "0.1.0"
__all__ = ["Augment", "BlockSampler", "CdpError", "Checkpoint", "KeyList", "Mix", "Pool", "PoolDataset", "Record",
           "Rng", "decode_checkpoint", "decode_record", "derive", "epoch_order",
           "load_checkpoint", "read_keys", "split_key", "steps_per_epoch"]
