//! `tokenizers`' BPE model: a word's characters (with the continuing-subword prefix and
//! end-of-word suffix, byte fallback and UNK fusing), then the listed merge of lowest
//! rank, leftmost first, until none applies; with `ignore_merges`, a word that is a
//! vocabulary token is that token. Byte-level words arrive as raw bytes: each byte
//! stands for its byte-level character.

use rustc_hash::FxHashMap;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Words longer than this are not cached (as `tokenizers`, whose limit is 256 bytes of
/// the model's string; a byte-level character takes up to 2).
const CACHE_WORD_BYTES: usize = 256;
const CACHE_WORDS: usize = 1 << 18; // about 25 MB of distinct words at most

pub struct Bpe {
    vocab: FxHashMap<Box<str>, u32>,
    merges: FxHashMap<(u32, u32), (u32, u32)>,
    ignore_merges: bool,
    byte_fallback: bool,
    byte_tokens: [Option<u32>; 256], // "<0xXX>"
    unk_token: Option<String>,
    fuse_unk: bool,
    prefix: Option<String>,
    suffix: Option<String>,
    byte_level: bool,
    /// Byte-level only: the token of each byte's character, when all 256 are tokens
    /// and there is no prefix or suffix (then a word's first symbols are its bytes).
    byte_ids: Option<[u32; 256]>,
    /// Byte-level only: tokens written in byte-level characters, keyed by their bytes.
    raw_vocab: FxHashMap<Box<[u8]>, u32>,
    cache: FxHashMap<Box<[u8]>, Box<[u32]>>,
    symbols: Vec<Symbol>,
    heap: BinaryHeap<Reverse<(u32, u32, u32)>>,
}

#[derive(Clone, Copy)]
struct Symbol {
    c: u32,
    prev: i32,
    next: i32,
    len: u32,
}

#[derive(Deserialize)]
struct File<'a> {
    #[serde(borrow)]
    model: ModelJson<'a>,
}

/// The fields of a BPE `model` the engine reads (the rest is skipped unparsed).
#[derive(Deserialize)]
struct ModelJson<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Text<'a>>,
    dropout: Option<f64>,
    #[serde(borrow)]
    unk_token: Option<Text<'a>>,
    #[serde(borrow)]
    continuing_subword_prefix: Option<Text<'a>>,
    #[serde(borrow)]
    end_of_word_suffix: Option<Text<'a>>,
    fuse_unk: Option<bool>,
    byte_fallback: Option<bool>,
    ignore_merges: Option<bool>,
    #[serde(borrow)]
    vocab: Entries<'a>,
    #[serde(borrow)]
    merges: Vec<Merge<'a>>,
}

/// A JSON string, borrowed from the file where it has no escapes.
struct Text<'a>(Cow<'a, str>);

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a string")
    }
    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Borrowed(v)))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(v.to_owned())))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Text<'de>, E> {
        Ok(Text(Cow::Owned(v)))
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

/// The vocab object's entries in file order.
struct Entries<'a>(Vec<(Text<'a>, u32)>);

impl<'de: 'a, 'a> Deserialize<'de> for Entries<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Entries<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a vocab object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries<'de>, A::Error> {
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(0));
                while let Some(entry) = map.next_entry::<Text<'de>, u32>()? {
                    out.push(entry);
                }
                Ok(Entries(out))
            }
        }
        d.deserialize_map(V).map(|e| Entries(e.0.into_iter().map(|(t, i)| (Text(t.0), i)).collect()))
    }
}

/// A merge as "a b" (older files) or ["a", "b"].
enum Merge<'a> {
    Line(Text<'a>),
    Pair(Text<'a>, Text<'a>),
}

impl<'de: 'a, 'a> Deserialize<'de> for Merge<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Merge<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a merge")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Merge<'de>, E> {
                Ok(Merge::Line(Text(Cow::Borrowed(v))))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Merge<'de>, E> {
                Ok(Merge::Line(Text(Cow::Owned(v.to_owned()))))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Merge<'de>, A::Error> {
                let a = seq.next_element::<Text<'de>>()?.ok_or_else(|| de::Error::custom("a merge of one token"))?;
                let b = seq.next_element::<Text<'de>>()?.ok_or_else(|| de::Error::custom("a merge of one token"))?;
                if seq.next_element::<de::IgnoredAny>()?.is_some() {
                    return Err(de::Error::custom("a merge of more than two tokens"));
                }
                Ok(Merge::Pair(a, b))
            }
        }
        d.deserialize_any(V).map(|m| match m {
            Merge::Line(t) => Merge::Line(Text(t.0)),
            Merge::Pair(a, b) => Merge::Pair(Text(a.0), Text(b.0)),
        })
    }
}

/// GPT-2's byte -> character table.
pub fn byte_chars() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut extra = 0u32;
    for b in 0..256u32 {
        let printable = (b'!' as u32..=b'~' as u32).contains(&b)
            || (0xA1..=0xAC).contains(&b)
            || (0xAE..=0xFF).contains(&b);
        table[b as usize] = if printable {
            char::from_u32(b).unwrap()
        } else {
            extra += 1;
            char::from_u32(255 + extra).unwrap()
        };
    }
    table
}

pub enum Outcome {
    Done,
    /// The model would fail (an UNK token missing from the vocabulary): the text is
    /// left to `tokenizers`, which reports it.
    Refused,
}

impl Bpe {
    /// From the tokenizer.json's bytes (its `model`); `byte_level`: the pre-tokenizer
    /// ends in ByteLevel.
    pub fn from_json(data: &[u8], byte_level: bool) -> Result<Bpe, String> {
        let file: File = serde_json::from_slice(data).map_err(|e| format!("the tokenizer.json: {e}"))?;
        let model = file.model;
        if model.kind.as_deref() != Some("BPE") {
            return Err("the model is not BPE".into());
        }
        if model.dropout.is_some_and(|d| d != 0.0) {
            return Err("the BPE has dropout".into());
        }
        let text = |v: &Option<Text>| v.as_deref().filter(|s| !s.is_empty()).map(str::to_owned);
        let mut vocab: FxHashMap<Box<str>, u32> = FxHashMap::default();
        vocab.reserve(model.vocab.0.len());
        for (token, id) in &model.vocab.0 {
            vocab.insert((**token).into(), *id);
        }
        let prefix = text(&model.continuing_subword_prefix);
        let prefix_len = prefix.as_ref().map_or(0, |p| p.len());
        let mut merges: FxHashMap<(u32, u32), (u32, u32)> = FxHashMap::default();
        merges.reserve(model.merges.len());
        let mut joined = String::new();
        for (rank, merge) in model.merges.iter().enumerate() {
            let (a, b) = match merge {
                Merge::Line(line) => {
                    let mut parts = line.split(' ');
                    match (parts.next(), parts.next(), parts.next()) {
                        (Some(a), Some(b), None) => (a, b),
                        _ => return Err(format!("the merge {:?} is not two tokens", &**line)),
                    }
                }
                Merge::Pair(a, b) => (&**a, &**b),
            };
            let a_id = *vocab.get(a).ok_or_else(|| format!("the merge token {a:?} is not in the vocab"))?;
            let b_id = *vocab.get(b).ok_or_else(|| format!("the merge token {b:?} is not in the vocab"))?;
            joined.clear();
            joined.push_str(a);
            joined.push_str(b.get(prefix_len..).ok_or("a merge shorter than the prefix")?);
            let new_id = *vocab.get(joined.as_str())
                .ok_or_else(|| format!("the merge result {joined:?} is not in the vocab"))?;
            merges.insert((a_id, b_id), (rank as u32, new_id)); // a later duplicate wins
        }
        let mut byte_tokens = [None; 256];
        for (b, slot) in byte_tokens.iter_mut().enumerate() {
            *slot = vocab.get(format!("<{b:#04X}>").as_str()).copied();
        }
        let suffix = text(&model.end_of_word_suffix);
        let chars = byte_chars();
        let mut raw_vocab = FxHashMap::default();
        let mut byte_ids = None;
        if byte_level {
            let mut from_char: FxHashMap<char, u8> = FxHashMap::default();
            for (b, c) in chars.iter().enumerate() {
                from_char.insert(*c, b as u8);
            }
            for (token, id) in &vocab {
                let raw: Option<Vec<u8>> = token.chars().map(|c| from_char.get(&c).copied()).collect();
                if let Some(raw) = raw {
                    raw_vocab.insert(raw.into_boxed_slice(), *id);
                }
            }
            if prefix.is_none() && suffix.is_none() {
                let mut ids = [0u32; 256];
                let mut all = true;
                for (b, c) in chars.iter().enumerate() {
                    match vocab.get(c.to_string().as_str()) {
                        Some(id) => ids[b] = *id,
                        None => all = false,
                    }
                }
                if all {
                    byte_ids = Some(ids);
                }
            }
        }
        Ok(Bpe {
            vocab,
            merges,
            ignore_merges: model.ignore_merges.unwrap_or(false),
            byte_fallback: model.byte_fallback.unwrap_or(false),
            byte_tokens,
            unk_token: model.unk_token.map(|t| t.0.into_owned()),
            fuse_unk: model.fuse_unk.unwrap_or(false),
            prefix,
            suffix,
            byte_level,
            byte_ids,
            raw_vocab,
            cache: FxHashMap::default(),
            symbols: Vec::new(),
            heap: BinaryHeap::new(),
        })
    }

    /// Appends the ids of one pre-tokenized word (raw bytes for a byte-level model, the
    /// piece's UTF-8 otherwise).
    pub fn word(&mut self, word: &[u8], out: &mut Vec<u32>) -> Outcome {
        if word.is_empty() {
            return Outcome::Done;
        }
        if self.ignore_merges {
            let found = if self.byte_level {
                self.raw_vocab.get(word).copied()
            } else {
                self.vocab.get(std::str::from_utf8(word).unwrap()).copied()
            };
            if let Some(id) = found {
                out.push(id);
                return Outcome::Done;
            }
        }
        if let Some(ids) = self.cache.get(word) {
            out.extend_from_slice(ids);
            return Outcome::Done;
        }
        let start = out.len();
        self.symbols.clear();
        if let (true, Some(ids)) = (self.byte_level, self.byte_ids.as_ref()) {
            for (k, &b) in word.iter().enumerate() {
                self.symbols.push(Symbol { c: ids[b as usize], prev: k as i32 - 1,
                                           next: k as i32 + 1, len: 1 });
            }
        } else {
            let text: String = if self.byte_level {
                let chars = byte_chars();
                word.iter().map(|&b| chars[b as usize]).collect()
            } else {
                std::str::from_utf8(word).unwrap().to_owned()
            };
            if self.initial_symbols(&text).is_err() {
                return Outcome::Refused;
            }
        }
        self.merge_all();
        out.extend(self.symbols.iter().filter(|s| s.len != 0).map(|s| s.c));
        if word.len() <= CACHE_WORD_BYTES && self.cache.len() < CACHE_WORDS {
            self.cache.insert(word.into(), out[start..].into());
        }
        Outcome::Done
    }

    fn add(&mut self, c: u32, len: u32) {
        let k = self.symbols.len() as i32;
        self.symbols.push(Symbol { c, prev: k - 1, next: k + 1, len });
    }

    /// The word's first symbols, as `tokenizers`' `merge_word` makes them.
    fn initial_symbols(&mut self, text: &str) -> Result<(), ()> {
        let mut unk: Option<(u32, u32)> = None;
        let mut chars = text.char_indices().peekable();
        let mut piece = String::new();
        while let Some((i, c)) = chars.next() {
            let is_first = i == 0;
            let is_last = chars.peek().is_none();
            let byte_len = c.len_utf8() as u32;
            piece.clear();
            if let (false, Some(prefix)) = (is_first, &self.prefix) {
                piece.push_str(prefix);
            }
            piece.push(c);
            if let (true, Some(suffix)) = (is_last, &self.suffix) {
                piece.push_str(suffix);
            }
            if let Some(&id) = self.vocab.get(piece.as_str()) {
                if let Some((unk_id, unk_len)) = unk.take() {
                    self.add(unk_id, unk_len);
                }
                self.add(id, byte_len);
                continue;
            }
            if self.byte_fallback {
                let bytes: Option<Vec<u32>> = piece.bytes().map(|b| self.byte_tokens[b as usize]).collect();
                if let Some(bytes) = bytes {
                    for t in bytes {
                        self.add(t, 1);
                    }
                    continue;
                }
            }
            if let Some(unk_token) = &self.unk_token {
                let unk_id = *self.vocab.get(unk_token.as_str()).ok_or(())?;
                unk = match (unk, self.fuse_unk) {
                    (Some((id, len)), true) => Some((id, len + byte_len)),
                    (Some((id, len)), false) => {
                        self.add(id, len);
                        Some((unk_id, byte_len))
                    }
                    (None, _) => Some((unk_id, byte_len)),
                };
            }
        }
        if let Some((unk_id, unk_len)) = unk {
            self.add(unk_id, unk_len);
        }
        if let Some(last) = self.symbols.last_mut() {
            last.next = -1;
        }
        Ok(())
    }

    /// `Word::merge_all` without dropout: a min-heap of (rank, position), an entry
    /// dropped when its symbol is gone or its pair no longer makes the same token.
    fn merge_all(&mut self) {
        let n = self.symbols.len();
        if n == 0 {
            return;
        }
        self.symbols[n - 1].next = -1;
        let symbols = &mut self.symbols;
        let merges = &self.merges;
        let heap = &mut self.heap;
        heap.clear();
        for pos in 0..n - 1 {
            if let Some(&(rank, new_id)) = merges.get(&(symbols[pos].c, symbols[pos + 1].c)) {
                heap.push(Reverse((rank, pos as u32, new_id)));
            }
        }
        while let Some(Reverse((_, pos, new_id))) = heap.pop() {
            let pos = pos as usize;
            if symbols[pos].len == 0 || symbols[pos].next == -1 {
                continue;
            }
            let next = symbols[pos].next as usize;
            let right = symbols[next];
            match merges.get(&(symbols[pos].c, right.c)) {
                Some(&(_, id)) if id == new_id => {}
                _ => continue,
            }
            symbols[pos].c = new_id;
            symbols[pos].len += right.len;
            symbols[pos].next = right.next;
            symbols[next].len = 0;
            if right.next > -1 && (right.next as usize) < n {
                symbols[right.next as usize].prev = pos as i32;
            }
            let current = symbols[pos];
            if current.prev >= 0 {
                let prev = current.prev as usize;
                if let Some(&(rank, id)) = merges.get(&(symbols[prev].c, current.c)) {
                    heap.push(Reverse((rank, prev as u32, id)));
                }
            }
            if current.next > -1 && (current.next as usize) < n {
                let after = current.next as usize;
                if let Some(&(rank, id)) = merges.get(&(current.c, symbols[after].c)) {
                    heap.push(Reverse((rank, pos as u32, id)));
                }
            }
        }
    }
}
