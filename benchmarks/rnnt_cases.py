# SPDX-License-Identifier: Apache-2.0
"""The RNN-T loss cases that bench_rnnt_loss.py and rss_rnnt_loss.py share."""

SHAPES = [(8, 150, 40, 500), (4, 300, 80, 128)]
IMPLS = {
    "fused": "tt.rnnt_loss (fused op)",
    "yardstick": "tf.nn.log_softmax fwd + bwd",
    "pure_tf": "pure-TF RNN-T loss",
}


def loss_function(impl, labels):
    """logits -> scalar loss of one of IMPLS, for labels [B, U]."""
    import tensorflow as tf

    import tf_transducer as tt
    from benchmarks.pure_tf_rnnt import pure_tf_rnnt_loss

    return {
        "fused": lambda x: tt.rnnt_loss(x, labels, 0),
        "yardstick": lambda x: tf.reduce_mean(tf.nn.log_softmax(x)[..., 0]),
        "pure_tf": lambda x: pure_tf_rnnt_loss(x, labels, 0),
    }[impl]
