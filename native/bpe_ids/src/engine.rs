//! One text to ids, in `tokenizers`' order: added tokens read out of the raw text, the
//! rest normalized, added tokens read out of that, each remaining piece pre-tokenized
//! and given to the BPE model.

use crate::model::{Bpe, Outcome};
use crate::normalize::{normalize, Normalizer};
use crate::pattern::Frame;
use crate::pretokenize::{Pieces, Step};
use daachorse::{DoubleArrayAhoCorasick, DoubleArrayAhoCorasickBuilder, MatchKind};
use std::path::PathBuf;

struct AddedToken {
    id: u32,
    special: bool,
    lstrip: bool,
    rstrip: bool,
}

/// The added tokens matched in one text form (raw or normalized): `tokenizers`'
/// leftmost-longest automaton over their contents.
struct AddedSet {
    automaton: Option<DoubleArrayAhoCorasick<u32>>,
    tokens: Vec<AddedToken>,
}

impl AddedSet {
    fn new(entries: Vec<(String, AddedToken)>) -> Result<AddedSet, String> {
        if entries.is_empty() {
            return Ok(AddedSet { automaton: None, tokens: Vec::new() });
        }
        let automaton = DoubleArrayAhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build_with_values(entries.iter().enumerate().map(|(k, (text, _))| (text.as_str(), k as u32)))
            .map_err(|e| format!("the added tokens: {e}"))?;
        Ok(AddedSet { automaton: Some(automaton), tokens: entries.into_iter().map(|(_, t)| t).collect() })
    }

    /// `AddedVocabulary::find_matches`: (token id or None, byte range) covering `text`.
    fn split(&self, text: &str, plain: bool, out: &mut Vec<(Option<u32>, usize, usize)>) {
        out.clear();
        let Some(automaton) = &self.automaton else {
            out.push((None, 0, text.len()));
            return;
        };
        let mut start_offset = 0;
        for m in automaton.leftmost_find_iter(text) {
            let token = &self.tokens[m.value() as usize];
            if plain && token.special {
                continue;
            }
            let mut start = m.start();
            let mut stop = m.end();
            if token.lstrip {
                start = text[..start].trim_end().len().max(start_offset);
            }
            if token.rstrip {
                let rest = &text[stop..];
                stop += rest.len() - rest.trim_start().len();
            }
            if start_offset < start {
                out.push((None, start_offset, start));
            }
            out.push((Some(token.id), start, stop));
            start_offset = stop;
        }
        if start_offset != text.len() {
            out.push((None, start_offset, text.len()));
        }
    }
}

pub struct Engine {
    normalizers: Vec<Normalizer>,
    steps: Vec<Step>,
    raw: AddedSet,
    normalized: AddedSet,
    /// Texts holding a `single_word` token are left to `tokenizers`: whether one stands
    /// alone is decided by `\w`, whose Unicode tables are Rust's of its build.
    single_word: Option<DoubleArrayAhoCorasick<u32>>,
    model: Bpe,
    byte_level: bool,
    pieces: Pieces,
    stack: Vec<Frame>,
    raw_split: Vec<(Option<u32>, usize, usize)>,
    normalized_split: Vec<(Option<u32>, usize, usize)>,
}

impl Engine {
    pub fn new(tokenizer_json: &[u8], config_json: &str) -> Result<Engine, String> {
        let config: serde_json::Value =
            serde_json::from_str(config_json).map_err(|e| format!("the engine config: {e}"))?;
        let cache_dir = config["cache_dir"].as_str().map(PathBuf::from);
        let cache_dir = cache_dir.as_deref();
        let mut normalizers = Vec::new();
        for n in config["normalizers"].as_array().into_iter().flatten() {
            normalizers.push(Normalizer::from_json(n)?);
        }
        let mut steps = Vec::new();
        for s in config["steps"].as_array().into_iter().flatten() {
            steps.push(Step::from_json(s, cache_dir)?);
        }
        let byte_level = config["byte_level"].as_bool().unwrap_or(false);
        let model = Bpe::from_json(tokenizer_json, byte_level)?;
        let mut raw = Vec::new();
        let mut normal = Vec::new();
        let mut single = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for t in config["added"].as_array().into_iter().flatten() {
            let content = t["content"].as_str().ok_or("an added token without content")?;
            if content.is_empty() || !seen.insert(content.to_owned()) {
                continue;
            }
            let flag = |key: &str| t[key].as_bool().unwrap_or(false);
            let token = AddedToken {
                id: t["id"].as_u64().ok_or("an added token without id")? as u32,
                special: flag("special"),
                lstrip: flag("lstrip"),
                rstrip: flag("rstrip"),
            };
            if flag("single_word") {
                single.push(content.to_owned());
            }
            if flag("normalized") {
                normal.push((normalize(&normalizers, content), token));
            } else {
                raw.push((content.to_owned(), token));
            }
        }
        let single_word = if single.is_empty() {
            None
        } else {
            Some(DoubleArrayAhoCorasick::new(single.iter().map(String::as_str))
                .map_err(|e| format!("the single_word tokens: {e}"))?)
        };
        Ok(Engine {
            normalizers,
            steps,
            raw: AddedSet::new(raw)?,
            normalized: AddedSet::new(normal)?,
            single_word,
            model,
            byte_level,
            pieces: Pieces::new(),
            stack: Vec::new(),
            raw_split: Vec::new(),
            normalized_split: Vec::new(),
        })
    }

    /// Appends the ids of `text` to `out`; false (and `out` as it was) where the text is
    /// left to `tokenizers`. `plain`: special tokens' text is plain text.
    pub fn encode(&mut self, text: &str, plain: bool, out: &mut Vec<u32>) -> bool {
        let before = out.len();
        if let Some(single) = &self.single_word {
            if single.find_iter(text).next().is_some() {
                return false;
            }
        }
        let mut raw_split = std::mem::take(&mut self.raw_split);
        self.raw.split(text, plain, &mut raw_split);
        let mut ok = true;
        for &(id, start, end) in &raw_split {
            if let Some(id) = id {
                out.push(id);
            } else if !self.encode_segment(&text[start..end], start == 0, plain, out) {
                ok = false;
                break;
            }
        }
        self.raw_split = raw_split;
        if !ok {
            out.truncate(before);
        }
        ok
    }

    fn encode_segment(&mut self, segment: &str, origin: bool, plain: bool, out: &mut Vec<u32>) -> bool {
        let normalized;
        let text: &str = if self.normalizers.is_empty() {
            segment
        } else {
            normalized = normalize(&self.normalizers, segment);
            &normalized
        };
        let mut split = std::mem::take(&mut self.normalized_split);
        self.normalized.split(text, plain, &mut split);
        let mut ok = true;
        for &(id, start, end) in &split {
            if let Some(id) = id {
                out.push(id);
                continue;
            }
            self.pieces.reset(&text[start..end], origin && start == 0);
            for step in &self.steps {
                step.apply(&mut self.pieces, &mut self.stack);
            }
            let pieces = &self.pieces;
            for piece in &pieces.list {
                let word = &pieces.text.as_bytes()[piece.start..piece.end];
                if let Outcome::Refused = self.model.word(word, out) {
                    ok = false;
                    break;
                }
            }
            if !ok {
                break;
            }
        }
        self.normalized_split = split;
        ok
    }

    pub fn byte_level(&self) -> bool {
        self.byte_level
    }
}
