"""Text datasets: the word-level tokenizer, AG's News CSVs, the WordNet-4 stand-in and the
generated retrieval task, each loaded as token ids with their mask."""

from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from .. import retrieval
from .downloads import _check_examples, _ensure_file, _standin_path, _standin_remedy, _unreadable
from .records import SPLITS, DataError, Dataset, _fixed_order, record

AG_NEWS_ROWS = {"train": 120_000, "test": 7_600}  # integrity check on top of the sha256
VOCAB_SIZE = 20_000


class Tokenizer:
    """Word-level tokenizer with a vocabulary built from training texts only.

    Words are the runs of `\\w` characters (letters, digits, underscore) of the lowercased
    text. Ids: 0 `<pad>`, 1 `<unk>`, 2 `<cls>`, then the words by decreasing frequency in the
    training texts (ties in alphabetical order), so the vocabulary is a deterministic function
    of the training split. Words seen only once in training map to `<unk>` by default
    (`min_freq=2`), like words that occur only in the test split: an id seen once can only be
    memorized. Word-level is the classic setup for AG's News with small
    Transformers (e.g. torchtext's `basic_english` tutorials); a subword model would need
    merges trained elsewhere or an extra dependency, and the rank-collapse measurements only
    need each text as a sequence of at most `max_len` tokens.
    """

    PAD, UNK, CLS = 0, 1, 2
    SPECIALS = ("<pad>", "<unk>", "<cls>")
    _WORD = re.compile(r"\w+")

    def __init__(self, itos: list[str]):
        if tuple(itos[:3]) != self.SPECIALS:
            raise ValueError(f"a vocabulary must start with {self.SPECIALS}; got {itos[:3]}")
        self.itos = list(itos)
        self.stoi = {word: i for i, word in enumerate(self.itos)}

    @classmethod
    def from_texts(cls, texts, max_size: int = VOCAB_SIZE, min_freq: int = 2) -> Tokenizer:
        """The `max_size - 3` most frequent words seen at least `min_freq` times, plus the
        three special tokens: `len(tokenizer) <= max_size`."""
        counts = Counter(word for text in texts for word in cls.tokenize(text))
        ranked = sorted((w for w, c in counts.items() if c >= min_freq),
                        key=lambda w: (-counts[w], w))
        return cls(list(cls.SPECIALS) + ranked[: max_size - len(cls.SPECIALS)])

    @classmethod
    def tokenize(cls, text: str) -> list[str]:
        """The lowercased words of `text`."""
        return cls._WORD.findall(text.lower())

    def encode(self, texts, max_len: int = 128) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids int64 `(N, max_len)`: `<cls>`, then the first `max_len - 1` words
        (unknown words -> `<unk>`), then `<pad>`; and the mask bool `(N, max_len)`, True on
        `<cls>` and words."""
        if max_len < 1:
            raise ValueError(f"max_len must be at least 1 (room for <cls>); got {max_len}")
        ids = np.zeros((len(texts), max_len), dtype=np.int64)
        for row, text in enumerate(texts):
            words = self.tokenize(text)[: max_len - 1]
            ids[row, : len(words) + 1] = [self.CLS] + [self.stoi.get(w, self.UNK) for w in words]
        ids = torch.from_numpy(ids)
        mask = ids != self.PAD
        return ids, mask

    def decode(self, ids) -> str:
        """The tokens of one id sequence, padding dropped, joined by spaces."""
        return " ".join(self.itos[int(i)] for i in ids if int(i) != self.PAD)

    def __len__(self) -> int:
        return len(self.itos)



def read_ag_news_csv(path: str | Path, expected_rows: int | None = None
                     ) -> tuple[list[str], np.ndarray]:
    """Texts and labels int64 `(N,)` of an AG's News CSV: rows `"class","title","description"`
    with class 1..4 (-> labels 0..3); text = title + " " + description. `expected_rows`, when
    given, must equal the number of rows (the real files: `AG_NEWS_ROWS`). The file must be
    UTF-8, as the real ones are (torchtext and Hugging Face read them so): another byte is
    refused (DataError naming the line and byte), never guessed at, since it means another
    file or a re-encoded one."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        raise DataError(f"{path}, line {line}: byte 0x{raw[err.start]:02x} (offset {err.start}) "
                        f"is not UTF-8, which the AG's News CSVs are; the file is another one "
                        f"or was re-encoded (Latin-1?). Convert it to UTF-8, or delete it to "
                        f"download it again.") from err
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        rows = list(reader)
    except csv.Error as err:
        raise DataError(f"{path}, line {reader.line_num}: not CSV ({err}); delete it to "
                        f"download it again.") from err
    if expected_rows is not None and len(rows) != expected_rows:
        raise DataError(f"{path}: {len(rows)} rows, expected {expected_rows}; the file is "
                        f"truncated or not the AG's News CSV. Delete it to download it again.")
    texts, labels = [], []
    for line, row in enumerate(rows, start=1):
        if len(row) != 3 or row[0] not in ("1", "2", "3", "4"):
            raise DataError(f"{path}, row {line}: expected \"class\",\"title\",\"description\" "
                            f"with class 1..4; got {row[:3]!r}")
        texts.append(f"{row[1]} {row[2]}")
        labels.append(int(row[0]) - 1)
    return texts, np.array(labels, dtype=np.int64)


WORDNET4_COLUMNS = ("split", "label", "synset", "title", "description")


def _read_wordnet4(split: str) -> tuple[list[str], np.ndarray]:
    """Texts (synset words + " " + gloss, built like AG's title + description) and labels of
    the committed WordNet-4 stand-in. Every row must have a value in each column, a split of
    `SPLITS` and a label among the classes, and both splits must pass `_check_examples`,
    whichever is asked for: a bad rebuild is refused at first use (DataError naming the row)."""
    rec, path, remedy = record("wordnet4"), _standin_path("wordnet4"), _standin_remedy("wordnet4")
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            rows = list(csv.DictReader(f))
    except (OSError, EOFError, zlib.error, UnicodeDecodeError, csv.Error) as error:
        raise _unreadable(path, "a gzip-compressed UTF-8 CSV", error, remedy) from error
    texts, labels = {s: [] for s in SPLITS}, {s: [] for s in SPLITS}
    for number, row in enumerate(rows, start=2):  # row 1 is the header
        if None in row or None in row.values() or not row.keys() >= set(WORDNET4_COLUMNS):
            problem = f"expected one value in each of the columns {', '.join(WORDNET4_COLUMNS)}"
        elif row["split"] not in SPLITS:
            problem = f"split {row['split']!r}, expected one of {', '.join(SPLITS)}"
        elif row["label"] not in rec.classes:
            problem = f"label {row['label']!r}, expected one of {', '.join(rec.classes)}"
        else:
            texts[row["split"]].append(f"{row['title']} {row['description']}")
            labels[row["split"]].append(rec.classes.index(row["label"]))
            continue
        raise DataError(f"{path}, row {number}: {problem}. {remedy}")
    arrays = {s: np.array(labels[s], dtype=np.int64) for s in SPLITS}
    for s in SPLITS:
        _check_examples(path, s, texts[s], arrays[s], rec, remedy)
    return texts[split], arrays[split]


def _read_texts(name: str, split: str, root: Path) -> tuple[list[str], np.ndarray]:
    if name == "ag_news":
        path = _ensure_file("ag_news", f"{split}.csv", root)
        return read_ag_news_csv(path, AG_NEWS_ROWS[split])
    return _read_wordnet4(split)


def _load_text(name: str, split: str, root: Path, max_len: int, tokenizer: Tokenizer | None,
               limit: int | None) -> Dataset:
    texts, labels = _read_texts(name, split, root)
    if tokenizer is None:  # always from the whole training split, whatever `limit` is
        train_texts = texts if split == "train" else _read_texts(name, "train", root)[0]
        tokenizer = Tokenizer.from_texts(train_texts)
    order = _fixed_order(len(labels))[:limit]
    ids, mask = tokenizer.encode([texts[i] for i in order], max_len)
    return Dataset(name, split, ids, torch.from_numpy(labels[order]), mask,
                   list(record(name).classes), "text", record(name).source, tokenizer)


def _load_retrieval(split: str, limit: int | None, max_len: int) -> Dataset:
    if max_len < 1 + retrieval.KEYS:
        raise ValueError(f"the retrieval task's sequences have {1 + retrieval.KEYS} tokens; "
                         f"max_len={max_len} cannot hold them")
    vocab = Tokenizer(list(Tokenizer.SPECIALS) + retrieval.words())
    x, y = retrieval.generate(split, len(Tokenizer.SPECIALS), limit)
    return Dataset("retrieval", split, x, y, torch.ones_like(x, dtype=torch.bool),
                   list(record("retrieval").classes), "text", record("retrieval").source, vocab)

