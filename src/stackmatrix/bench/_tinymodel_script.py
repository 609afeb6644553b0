# mypy: ignore-errors
"""Build a tiny random-weight Llama and a locally trained BPE tokenizer.

Run by an environment's own interpreter (it needs torch, transformers and
tokenizers, which stackmatrix itself never imports): ``python - DEST < this file``.
Nothing here touches the hub, so it works on a machine without network access.
"""

import json
import sys
from pathlib import Path

# A fixed corpus, so the tokenizer (and the vocabulary size) is the same on every
# machine. It repeats the benchmark's word list so that those words become
# single tokens, which keeps prompt lengths close to what the workload asked for.
WORDS_TEXT = "__WORDS__"
WORDS = WORDS_TEXT.split()
CORPUS = [" ".join(WORDS[i : i + 12]) for i in range(0, len(WORDS), 12)] + [
    "the quick brown fox jumps over the lazy dog",
    "a small model for a benchmark that needs no network",
    "one two three four five six seven eight nine ten",
]


def train_tokenizer(dest: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))  # noqa: S106 - a token, not a secret
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS * 4, trainer=trainer)
    special = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **special)
    fast.save_pretrained(dest)
    return fast


# "tiny" runs anywhere in seconds; "1b" has Llama-3.2-1B's shape (about 1e9 weights),
# big enough for GPU measurements where attention implementations differ.
SIZES = {
    "tiny": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
    },
    "1b": {
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
    },
}


def build_model(dest: Path, tokenizer, size: str) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        **SIZES[size],
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config)
    if size != "tiny":
        model = model.to(torch.bfloat16)
    model.save_pretrained(dest)


def main() -> int:
    dest = Path(sys.argv[1])
    dest.mkdir(parents=True, exist_ok=True)
    size = sys.argv[2] if len(sys.argv) > 2 else "tiny"
    tokenizer = train_tokenizer(dest)
    build_model(dest, tokenizer, size)
    (dest / "stackmatrix-tiny-model.json").write_text(
        json.dumps({"schema_version": 1, "vocab_size": len(tokenizer), "size": size}) + "\n"
    )
    print(dest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
