"""CPU debugging only (never on a training machine): let Megatron-LM's local spec build MLA.

At the pinned commit MLASelfAttention hands its core attention k_channels and v_channels
(multi_latent_attention.py:214), which the local DotProductAttention does not take, so without
Transformer Engine no MLA model can be built. This wraps DotProductAttention.__init__ to accept
them: the softmax scale MLA passes is kept, and the context is v_channels wide per head. The
forward is the unchanged local one (baddbmm, softmax, bmm), which is shape-generic. convert.py and
mlm_check.py import it when MLA_CPU_SHIM=1, to check a DeepSeek-shaped conversion and the derived
flags on a CPU before the device run (which uses TE's attention).
"""
from megatron.core.transformer.dot_product_attention import DotProductAttention

_init = DotProductAttention.__init__


def _init_with_channels(self, *args, k_channels=None, v_channels=None, **kwargs):
    _init(self, *args, **kwargs)
    if v_channels is not None:
        self.hidden_size_per_partition = v_channels * self.num_attention_heads_per_partition


DotProductAttention.__init__ = _init_with_channels
