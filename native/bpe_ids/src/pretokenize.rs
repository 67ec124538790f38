//! Pre-tokenizer steps as `tokenizers` applies them to each piece of a text: `Split`
//! (regex or literal, every delimiter behavior, inverted or not), `Metaspace`, and a
//! final `ByteLevel` (its GPT-2 regex split here, its byte mapping in the model).

use crate::pattern::{Frame, Pattern};
use std::path::Path;

#[derive(Clone, Copy, PartialEq)]
pub enum Behavior {
    Removed,
    Isolated,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

pub enum Matcher {
    Regex(Pattern),
    Literal(String),
    Char(char),
}

pub enum Step {
    Split { matcher: Matcher, behavior: Behavior, invert: bool },
    Metaspace { replacement: char, prepend: Prepend, split: bool },
    /// `ByteLevel`'s prefix space (its regex split is a `Split` step before it).
    PrefixSpace,
}

#[derive(Clone, Copy, PartialEq)]
pub enum Prepend {
    Always,
    First,
    Never,
}

/// A piece of `Pieces::text`: its byte range, and whether it begins at offset 0 of the
/// original text (Metaspace's "first" scheme prepends only there).
#[derive(Clone, Copy)]
pub struct Piece {
    pub start: usize,
    pub end: usize,
    pub origin: bool,
}

pub struct Pieces {
    pub text: String,
    pub list: Vec<Piece>,
    spare_text: String,
    spare_list: Vec<Piece>,
    flags: Vec<((usize, usize), bool)>,
}

impl Pieces {
    pub fn new() -> Pieces {
        Pieces { text: String::new(), list: Vec::new(), spare_text: String::new(),
                 spare_list: Vec::new(), flags: Vec::new() }
    }

    pub fn reset(&mut self, text: &str, origin: bool) {
        self.text.clear();
        self.text.push_str(text);
        self.list.clear();
        if !text.is_empty() {
            self.list.push(Piece { start: 0, end: text.len(), origin });
        }
    }
}

fn behavior(name: &str) -> Result<Behavior, String> {
    Ok(match name {
        "Removed" => Behavior::Removed,
        "Isolated" => Behavior::Isolated,
        "MergedWithPrevious" => Behavior::MergedWithPrevious,
        "MergedWithNext" => Behavior::MergedWithNext,
        "Contiguous" => Behavior::Contiguous,
        other => return Err(format!("the split behavior {other}")),
    })
}

impl Step {
    pub fn from_json(v: &serde_json::Value, cache_dir: Option<&Path>) -> Result<Step, String> {
        let kind = v["kind"].as_str().ok_or("a step without kind")?;
        Ok(match kind {
            "Split" => {
                let matcher = if let Some(regex) = v["regex"].as_str() {
                    Matcher::Regex(Pattern::new(regex, cache_dir)?)
                } else {
                    let literal = v["literal"].as_str().ok_or("a Split without pattern")?;
                    Matcher::Literal(literal.to_owned())
                };
                Step::Split {
                    matcher,
                    behavior: behavior(v["behavior"].as_str().unwrap_or(""))?,
                    invert: v["invert"].as_bool().unwrap_or(false),
                }
            }
            "Metaspace" => {
                let replacement = v["replacement"].as_str().and_then(|s| {
                    let mut chars = s.chars();
                    let c = chars.next()?;
                    chars.next().is_none().then_some(c)
                }).ok_or("a Metaspace replacement that is not one character")?;
                let prepend = match v["prepend_scheme"].as_str() {
                    Some("always") => Prepend::Always,
                    Some("first") => Prepend::First,
                    Some("never") => Prepend::Never,
                    other => return Err(format!("the prepend scheme {other:?}")),
                };
                Step::Metaspace { replacement, prepend, split: v["split"].as_bool().unwrap_or(true) }
            }
            "PrefixSpace" => Step::PrefixSpace,
            other => return Err(format!("the pre-tokenizer {other}")),
        })
    }

    pub fn apply(&self, pieces: &mut Pieces, stack: &mut Vec<Frame>) {
        match self {
            Step::Split { matcher, behavior, invert } => {
                split(pieces, matcher, *behavior, *invert, stack)
            }
            Step::Metaspace { replacement, prepend, split: cut } => {
                metaspace(pieces, *replacement, *prepend, *cut)
            }
            Step::PrefixSpace => prefix_space(pieces),
        }
    }
}

/// `pattern.find_matches` of `tokenizers`: the matches and the text between them, in
/// order, each flagged (empty matches included).
fn find_matches(matcher: &Matcher, text: &str, start: usize, end: usize, stack: &mut Vec<Frame>,
                out: &mut Vec<((usize, usize), bool)>) {
    out.clear();
    if start == end {
        out.push(((start, start), false));
        return;
    }
    let mut prev = start;
    let mut push = |s: usize, e: usize| {
        if prev != s {
            out.push(((prev, s), false));
        }
        out.push(((s, e), true));
        prev = e;
    };
    match matcher {
        Matcher::Regex(pattern) => pattern.find_iter(text.as_bytes(), start, end, stack, &mut push),
        Matcher::Literal(literal) => {
            if literal.is_empty() {
                // tokenizers: an empty string pattern matches nothing
            } else {
                let hay = &text[start..end];
                let mut from = 0;
                while let Some(k) = hay[from..].find(literal.as_str()) {
                    let s = start + from + k;
                    push(s, s + literal.len());
                    from += k + literal.len();
                }
            }
        }
        Matcher::Char(c) => {
            for (k, ch) in text[start..end].char_indices() {
                if ch == *c {
                    push(start + k, start + k + ch.len_utf8());
                }
            }
        }
    }
    if prev != end {
        out.push(((prev, end), false));
    }
}

/// `NormalizedString::split`'s grouping of the matches for `behavior`: the ranges kept.
fn group(flags: &[((usize, usize), bool)], behavior: Behavior, out: &mut Vec<(usize, usize)>) {
    out.clear();
    match behavior {
        Behavior::Isolated => out.extend(flags.iter().map(|(r, _)| *r)),
        Behavior::Removed => out.extend(flags.iter().filter(|(_, m)| !*m).map(|(r, _)| *r)),
        Behavior::Contiguous => {
            let mut previous = false;
            for &(r, m) in flags {
                match out.last_mut() {
                    Some(last) if m == previous => last.1 = r.1,
                    _ => out.push(r),
                }
                previous = m;
            }
        }
        Behavior::MergedWithPrevious => {
            let mut previous = false;
            for &(r, m) in flags {
                match out.last_mut() {
                    Some(last) if m && !previous => last.1 = r.1,
                    _ => out.push(r),
                }
                previous = m;
            }
        }
        Behavior::MergedWithNext => {
            let mut previous = false;
            for &(r, m) in flags.iter().rev() {
                match out.last_mut() {
                    Some(last) if m && !previous => last.0 = r.0,
                    _ => out.push(r),
                }
                previous = m;
            }
            out.reverse();
        }
    }
}

fn split(pieces: &mut Pieces, matcher: &Matcher, behavior: Behavior, invert: bool,
         stack: &mut Vec<Frame>) {
    let mut out = std::mem::take(&mut pieces.spare_list);
    out.clear();
    let mut flags = std::mem::take(&mut pieces.flags);
    let mut kept: Vec<(usize, usize)> = Vec::new();
    for piece in &pieces.list {
        find_matches(matcher, &pieces.text, piece.start, piece.end, stack, &mut flags);
        if invert {
            flags.iter_mut().for_each(|f| f.1 = !f.1);
        }
        group(&flags, behavior, &mut kept);
        for &(s, e) in &kept {
            if s < e {
                out.push(Piece { start: s, end: e, origin: piece.origin && s == piece.start });
            }
        }
    }
    pieces.flags = flags;
    pieces.spare_list = std::mem::replace(&mut pieces.list, out);
}

/// Rewrites each piece through `f` (the new text of a piece, or None to keep it) into a
/// new text buffer.
fn rewrite(pieces: &mut Pieces, mut f: impl FnMut(&str, bool, &mut String)) {
    let mut text = std::mem::take(&mut pieces.spare_text);
    text.clear();
    let mut list = std::mem::take(&mut pieces.spare_list);
    list.clear();
    for piece in &pieces.list {
        let start = text.len();
        f(&pieces.text[piece.start..piece.end], piece.origin, &mut text);
        list.push(Piece { start, end: text.len(), origin: piece.origin });
    }
    pieces.spare_text = std::mem::replace(&mut pieces.text, text);
    pieces.spare_list = std::mem::replace(&mut pieces.list, list);
}

fn metaspace(pieces: &mut Pieces, replacement: char, prepend: Prepend, cut: bool) {
    rewrite(pieces, |piece, origin, out| {
        // Spaces are replaced first: a piece that starts with one starts with the
        // replacement, and gets no other.
        let starts = piece.starts_with(' ') || piece.starts_with(replacement);
        let add = match prepend {
            Prepend::Always => !starts,
            Prepend::First => origin && !starts,
            Prepend::Never => false,
        };
        if add {
            out.push(replacement);
        }
        for c in piece.chars() {
            if c == ' ' { out.push(replacement) } else { out.push(c) }
        }
    });
    if cut {
        let mut stack = Vec::new();
        split(pieces, &Matcher::Char(replacement), Behavior::MergedWithNext, false, &mut stack);
    }
}

fn prefix_space(pieces: &mut Pieces) {
    rewrite(pieces, |piece, _, out| {
        if !piece.starts_with(' ') {
            out.push(' ');
        }
        out.push_str(piece);
    });
}
