# SPDX-License-Identifier: Apache-2.0
"""A trained Transducer evaluated: greedy or beam search, WER / CER, exports.

`evaluate` decodes a SpeechDataset with the Keras model; `evaluate_export`
streams audio files through an export's LiteRT programs.
"""

import os


def decode_batch(
    model, batch, beam_width=1, scorer=None, alpha=0.75, beta=1.85,
    beam_method="modified", token_lm=None, lm_scale=0.3, decoder="transducer",
):  # fmt: skip
    """Label sequences of a SpeechDataset batch.

    Greedy search with beam_width 1 and no LM, else beam search
    (`beam_method`: "modified", one symbol per frame at most, or "standard")
    with the scorer's word LM and (modified) a token n-gram (`TokenLm`).
    decoder="ctc" decodes a hybrid model's CTC head instead (best path, or
    prefix beam search with the word LM; no token n-gram).
    """
    from tf_transducer.decoding.hybrid import check_decoder
    from tf_transducer.decoding.hybrid import transducer_ctc_decode
    from tf_transducer.decoding.transducer import transducer_beam_search
    from tf_transducer.decoding.transducer import transducer_greedy_decode

    check_decoder(decoder, model)
    inputs = (batch["features"], batch["feature_length"])
    if decoder == "ctc":
        if token_lm is not None:
            raise ValueError(
                'token_lm is fused by the transducer search, not decoder="ctc"'
            )
        return transducer_ctc_decode(model, inputs, beam_width, scorer, alpha, beta)
    if beam_width == 1 and scorer is None and token_lm is None:
        return transducer_greedy_decode(model, inputs)
    return transducer_beam_search(
        model, inputs, beam_width, beam_method, scorer=scorer, alpha=alpha, beta=beta,
        token_lm=token_lm, lm_scale=lm_scale,
    )  # fmt: skip


def transcribe_data(model, encoder, data, batch_size=64, **decoding):
    """[(reference, hypothesis)] of every utterance of a SpeechDataset, in order.

    `decoding` holds beam_width, scorer, alpha, beta, beam_method, token_lm,
    lm_scale, decoder.
    """
    found = {}
    for batch in data.dataset(batch_size, shuffle=False):
        hyps = decode_batch(model, batch, **decoding)
        for index, labels in zip(batch["index"].numpy(), hyps, strict=True):
            found[int(index)] = (data.transcripts[index], encoder.decode(labels))
    return [found[i] for i in sorted(found)]


def error_counts(model, data, encoder):
    """Error counts of greedy search over a SpeechDataset.

    {"wer": (word errors, words), "cer": (char errors, chars)}: sums that add
    up across workers.
    """
    from tf_transducer.decoding import edit_distance

    counts = {"wer": [0, 0], "cer": [0, 0]}
    for ref, hyp in transcribe_data(model, encoder, data):
        for name, tokens in (("wer", str.split), ("cer", list)):
            counts[name][0] += edit_distance(tokens(ref), tokens(hyp))
            counts[name][1] += len(tokens(ref))
    return {name: tuple(c) for name, c in counts.items()}


def evaluate(
    model, encoder, data, beam_width=1, batch_size=64, scorer=None, alpha=0.75,
    beta=1.85, beam_method="modified", token_lm=None, lm_scale=0.3,
    decoder="transducer",
):  # fmt: skip
    """(WER, CER, [(reference, hypothesis)]) of a model on a SpeechDataset.

    beam_width 1 without an LM is greedy search; otherwise beam search
    (`beam_method` "modified": one symbol per frame at most, as k2 / icefall;
    "standard": as ESPnet, several per frame), with the scorer's LM weighted
    by alpha and beta per word, and (modified) a token n-gram (`TokenLm`)
    weighted by lm_scale. decoder="ctc": a hybrid model's CTC head.
    """
    from tf_transducer.decoding import char_error_rate
    from tf_transducer.decoding import word_error_rate

    pairs = transcribe_data(
        model, encoder, data, batch_size, beam_width=beam_width, scorer=scorer,
        alpha=alpha, beta=beta, beam_method=beam_method, token_lm=token_lm,
        lm_scale=lm_scale, decoder=decoder,
    )  # fmt: skip
    refs, hyps = [p[0] for p in pairs], [p[1] for p in pairs]
    return word_error_rate(refs, hyps), char_error_rate(refs, hyps), pairs


def evaluate_export(export_dir, paths, transcripts, num_threads=1):
    """Streams files through an export's LiteRT programs (greedy search).

    Args:
      export_dir: a folder written by `export_transducer`.
      paths: audio files (read at the export's rate).
      transcripts: the files' transcripts.
      num_threads: interpreter threads.

    Returns:
      {"quantization", "wer", "cer", "rtf" (compute seconds per audio second,
      audio reading excluded), "size" (bytes of the programs), "texts"}.
    """
    import time

    from tf_transducer.data import load_audio
    from tf_transducer.decoding import char_error_rate
    from tf_transducer.decoding import word_error_rate
    from tf_transducer.export import TransducerStream

    stream = TransducerStream(export_dir, num_threads=num_threads)
    texts, seconds, compute = [], 0.0, 0.0
    for path in paths:
        audio = load_audio(path, stream.sample_rate)
        began = time.perf_counter()
        texts.append(stream.transcribe(audio))
        compute += time.perf_counter() - began
        seconds += len(audio) / stream.sample_rate
    size = sum(
        os.path.getsize(os.path.join(export_dir, name))
        for name in os.listdir(export_dir)
        if name.endswith(".tflite")
    )
    return {
        "quantization": stream.quantization,
        "wer": word_error_rate(transcripts, texts),
        "cer": char_error_rate(transcripts, texts),
        "rtf": compute / seconds,
        "size": size,
        "texts": texts,
    }
