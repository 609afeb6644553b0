"""A real tokenizer.json, trained here with the `tokenizers` library on the workload's
word list: with a small vocabulary most words are several tokens, with a large one
each is one."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

from stackmatrix.bench import workload

SPECIAL = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2: those of the tiny model's tokenizer


def write_tokenizer(dest: Path, *, vocab: int, bos: bool, eos: bool = False) -> Path:
    """DEST/tokenizer.json, a byte-level BPE; `bos`: a Llama-style BOS on every text,
    `eos`: an EOS after it (as T5's tokenizer adds one)."""
    tok = Tokenizer(models.BPE(unk_token="<unk>"))  # noqa: S106 - a token, not a secret
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator([" ".join(workload.WORDS)] * 4, trainer=trainer)
    if bos or eos:
        marks = [m for m, on in (("<s>", bos), ("</s>", eos)) if on]
        special = [(m, tok.token_to_id(m)) for m in marks]
        single = " ".join([*marks[:bos], "$A", *marks[bos:]])
        tok.post_processor = processors.TemplateProcessing(single=single, special_tokens=special)
    dest.mkdir(parents=True, exist_ok=True)
    tok.save(str(dest / "tokenizer.json"))
    return dest
