//! Split regexes as Oniguruma matches them, for the subset tokenizers' files use.
//!
//! A pattern is parsed into alternations, sequences, repetitions, lookaheads and
//! single-character atoms (classes, escapes, literals, each with its case flag). What
//! an atom matches comes from Oniguruma (`classes`); how atoms combine is Oniguruma's
//! backtracking order (leftmost alternative first, greedy or lazy repetition, atomic
//! lookahead), run here by a small backtracking machine. Anything outside the subset
//! (anchors, backreferences, lookbehind, possessive or nested quantifiers, inline flags
//! other than a scoped `i`, case folding of non-ASCII literals, a repeated group that
//! can match empty) is refused with the reason, and the tokenizer stays on `tokenizers`.

use crate::classes::{self, Table};
use std::collections::HashMap;
use std::path::Path;

#[derive(Debug, Clone)]
enum Node {
    Atom(usize), // index into the atom list
    Seq(Vec<Node>),
    Alt(Vec<Node>),
    Repeat { node: Box<Node>, min: u32, max: u32, greedy: bool },
    Look { node: Box<Node>, negate: bool },
}

const UNBOUNDED: u32 = u32::MAX;
const MAX_COUNT: u32 = 100; // a larger finite count is refused (the program would grow)

struct Parser<'a> {
    chars: Vec<char>,
    at: usize,
    atoms: &'a mut Vec<String>,
    ids: &'a mut HashMap<String, usize>,
    interval_end: usize,
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }
    fn peek_at(&self, k: usize) -> Option<char> {
        self.chars.get(self.at + k).copied()
    }

    fn atom(&mut self, text: String, fold: bool) -> Result<Node, String> {
        let key = if fold { format!("(?i:{text})") } else { format!("(?-i:{text})") };
        let next = self.atoms.len();
        let id = *self.ids.entry(key.clone()).or_insert(next);
        if id == next {
            self.atoms.push(key);
            if self.atoms.len() > 64 {
                return Err("more than 64 distinct character classes".into());
            }
        }
        Ok(Node::Atom(id))
    }

    fn alternation(&mut self, fold: bool) -> Result<Node, String> {
        let mut branches = vec![self.sequence(fold)?];
        while self.peek() == Some('|') {
            self.at += 1;
            branches.push(self.sequence(fold)?);
        }
        Ok(if branches.len() == 1 { branches.pop().unwrap() } else { Node::Alt(branches) })
    }

    fn sequence(&mut self, fold: bool) -> Result<Node, String> {
        let mut items = Vec::new();
        while let Some(c) = self.peek() {
            if c == '|' || c == ')' {
                break;
            }
            let item = self.item(fold)?;
            items.push(self.quantified(item)?);
        }
        Ok(Node::Seq(items))
    }

    fn item(&mut self, fold: bool) -> Result<Node, String> {
        let c = self.peek().unwrap();
        match c {
            '(' => self.group(fold),
            '[' => {
                let text = self.bracket()?;
                self.atom(text, fold)
            }
            '\\' => self.escape(fold),
            '.' => {
                self.at += 1;
                self.atom(".".into(), fold)
            }
            '^' | '$' => Err(format!("the anchor {c:?}")),
            '*' | '+' | '?' | '{' => Err(format!("{c:?} with nothing to repeat")),
            _ => {
                self.at += 1;
                if fold && !c.is_ascii() {
                    return Err(format!("case folding of the non-ASCII literal {c:?}"));
                }
                self.atom(c.to_string(), fold)
            }
        }
    }

    fn group(&mut self, fold: bool) -> Result<Node, String> {
        self.at += 1; // '('
        let mut inner_fold = fold;
        let mut look: Option<bool> = None;
        if self.peek() == Some('?') {
            self.at += 1;
            match self.peek() {
                Some(':') => self.at += 1,
                Some('=') => {
                    self.at += 1;
                    look = Some(false);
                }
                Some('!') => {
                    self.at += 1;
                    look = Some(true);
                }
                _ => {
                    // Scoped flags: (?i:...), (?-i:...), (?i-:...)
                    let mut on = true;
                    loop {
                        match self.peek() {
                            Some('i') => inner_fold = on,
                            Some('-') => on = false,
                            Some(':') => {
                                self.at += 1;
                                break;
                            }
                            Some(other) => return Err(format!("the group option {other:?}")),
                            None => return Err("an unclosed group".into()),
                        }
                        self.at += 1;
                    }
                }
            }
        }
        let inner = self.alternation(inner_fold)?;
        if self.peek() != Some(')') {
            return Err("an unclosed group".into());
        }
        self.at += 1;
        Ok(match look {
            Some(negate) => Node::Look { node: Box::new(inner), negate },
            None => inner,
        })
    }

    /// A bracket class, as written, to its matching `]` (nested classes and POSIX
    /// brackets balanced, escapes skipped).
    fn bracket(&mut self) -> Result<String, String> {
        let start = self.at;
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            self.at += 1;
            match c {
                '\\' => {
                    if self.peek().is_none() {
                        return Err("an escape at the end".into());
                    }
                    self.at += 1;
                }
                '[' => {
                    depth += 1;
                    if self.peek() == Some('^') {
                        self.at += 1;
                    }
                    if self.peek() == Some(']') {
                        return Err("a class beginning with ']'".into());
                    }
                    continue;
                }
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(self.chars[start..self.at].iter().collect());
                    }
                }
                _ => {}
            }
        }
        Err("an unclosed class".into())
    }

    fn escape(&mut self, fold: bool) -> Result<Node, String> {
        let start = self.at;
        self.at += 1;
        let Some(c) = self.peek() else { return Err("an escape at the end".into()) };
        self.at += 1;
        match c {
            's' | 'S' | 'd' | 'D' | 'w' | 'W' | 'h' | 'H' | 't' | 'n' | 'r' | 'f' | 'v' | 'a'
            | 'e' => {}
            'p' | 'P' => {
                if self.peek() != Some('{') {
                    return Err(format!("\\{c} without braces"));
                }
                while let Some(d) = self.peek() {
                    self.at += 1;
                    if d == '}' {
                        break;
                    }
                }
            }
            'x' => {
                if self.peek() == Some('{') {
                    while let Some(d) = self.peek() {
                        self.at += 1;
                        if d == '}' {
                            break;
                        }
                    }
                } else {
                    for _ in 0..2 {
                        if self.peek().is_some_and(|d| d.is_ascii_hexdigit()) {
                            self.at += 1;
                        }
                    }
                }
            }
            'u' => {
                for _ in 0..4 {
                    if !self.peek().is_some_and(|d| d.is_ascii_hexdigit()) {
                        return Err("\\u without four hex digits".into());
                    }
                    self.at += 1;
                }
            }
            _ if c.is_ascii_punctuation() || c == ' ' => {}
            _ => return Err(format!("the escape \\{c}")),
        }
        let text: String = self.chars[start..self.at].iter().collect();
        self.atom(text, fold)
    }

    fn quantified(&mut self, node: Node) -> Result<Node, String> {
        let (min, max) = match self.peek() {
            Some('?') => (0, 1),
            Some('*') => (0, UNBOUNDED),
            Some('+') => (1, UNBOUNDED),
            Some('{') => self.interval()?,
            _ => return Ok(node),
        };
        if self.chars[self.at] != '{' {
            self.at += 1;
        } else {
            self.at = self.interval_end;
        }
        let mut greedy = true;
        if self.peek() == Some('?') {
            self.at += 1;
            greedy = false;
        }
        if matches!(self.peek(), Some('+') | Some('*') | Some('?') | Some('{')) {
            return Err("a possessive or repeated quantifier".into());
        }
        if max != UNBOUNDED && (max > MAX_COUNT || min > max) {
            return Err(format!("the count {{{min},{max}}}"));
        }
        if min > MAX_COUNT {
            return Err(format!("the count {{{min},}}"));
        }
        if matches!(node, Node::Look { .. }) {
            return Err("a repeated lookahead".into());
        }
        if !matches!(node, Node::Atom(_)) && nullable(&node) {
            return Err("a repeated group that can match empty".into());
        }
        Ok(Node::Repeat { node: Box::new(node), min, max, greedy })
    }

    /// `{n}`, `{n,}`, `{n,m}` or `{,m}` at the cursor (its end kept in `interval_end`);
    /// any other brace is refused.
    fn interval(&mut self) -> Result<(u32, u32), String> {
        let mut k = 1;
        let mut text = String::new();
        while let Some(c) = self.peek_at(k) {
            k += 1;
            if c == '}' {
                let parts: Vec<&str> = text.split(',').collect();
                let number = |s: &str| s.parse::<u32>().map_err(|_| format!("the interval {{{text}}}"));
                let bounds = match parts.as_slice() {
                    [n] if !n.is_empty() => (number(n)?, number(n)?),
                    [n, m] if !n.is_empty() && m.is_empty() => (number(n)?, UNBOUNDED),
                    [n, m] if !n.is_empty() => (number(n)?, number(m)?),
                    [n, m] if n.is_empty() && !m.is_empty() => (0, number(m)?),
                    _ => return Err(format!("the brace {{{text}}}")),
                };
                self.interval_end = self.at + k;
                return Ok(bounds);
            }
            if !(c.is_ascii_digit() || c == ',') {
                break;
            }
            text.push(c);
        }
        Err("a literal brace".into())
    }
}

fn nullable(node: &Node) -> bool {
    match node {
        Node::Atom(_) => false,
        Node::Seq(items) => items.iter().all(nullable),
        Node::Alt(branches) => branches.iter().any(nullable),
        Node::Repeat { node, min, .. } => *min == 0 || nullable(node),
        Node::Look { .. } => true,
    }
}

/// The atoms one of which the first character of any non-empty match must match.
fn first_mask(node: &Node) -> u64 {
    match node {
        Node::Atom(id) => 1u64 << id,
        Node::Seq(items) => {
            let mut mask = 0;
            for item in items {
                mask |= first_mask(item);
                if !nullable(item) {
                    break;
                }
            }
            mask
        }
        Node::Alt(branches) => branches.iter().fold(0, |m, b| m | first_mask(b)),
        Node::Repeat { node, .. } => first_mask(node),
        Node::Look { .. } => 0,
    }
}

#[derive(Debug, Clone, Copy)]
enum Inst {
    Atom(u64),
    Run { mask: u64, min: u32, max: u32, greedy: bool },
    Split(usize, usize), // try the first, then the second
    Jmp(usize),
    Look { program: usize, negate: bool },
    Match,
}

#[derive(Clone, Copy)]
pub enum Frame {
    Alt { pc: usize, pos: usize },
    // A greedy run that may give back characters down to `floor`.
    Shrink { pc: usize, floor: usize, pos: usize },
    // A lazy run that may take `room` more characters.
    Grow { pc: usize, pos: usize, room: u32, mask: u64 },
}

struct Compiler {
    programs: Vec<Vec<Inst>>,
}

impl Compiler {
    fn program(&mut self, node: &Node, masks: &[u64]) -> usize {
        let id = self.programs.len();
        self.programs.push(Vec::new());
        let mut code = Vec::new();
        self.emit(node, masks, &mut code);
        code.push(Inst::Match);
        self.programs[id] = code;
        id
    }

    fn emit(&mut self, node: &Node, masks: &[u64], code: &mut Vec<Inst>) {
        match node {
            Node::Atom(id) => code.push(Inst::Atom(masks[*id])),
            Node::Seq(items) => items.iter().for_each(|item| self.emit(item, masks, code)),
            Node::Alt(branches) => {
                let mut jumps = Vec::new();
                for (k, branch) in branches.iter().enumerate() {
                    if k + 1 < branches.len() {
                        let split = code.len();
                        code.push(Inst::Split(split + 1, 0));
                        self.emit(branch, masks, code);
                        jumps.push(code.len());
                        code.push(Inst::Jmp(0));
                        let next = code.len();
                        code[split] = Inst::Split(split + 1, next);
                    } else {
                        self.emit(branch, masks, code);
                    }
                }
                let end = code.len();
                for j in jumps {
                    code[j] = Inst::Jmp(end);
                }
            }
            Node::Repeat { node, min, max, greedy } => {
                if let Node::Atom(id) = **node {
                    code.push(Inst::Run { mask: masks[id], min: *min, max: *max, greedy: *greedy });
                    return;
                }
                for _ in 0..*min {
                    self.emit(node, masks, code);
                }
                let choice = |body: usize, out: usize| {
                    if *greedy { Inst::Split(body, out) } else { Inst::Split(out, body) }
                };
                if *max == UNBOUNDED {
                    let top = code.len();
                    code.push(Inst::Jmp(0));
                    self.emit(node, masks, code);
                    code.push(Inst::Jmp(top));
                    let out = code.len();
                    code[top] = choice(top + 1, out);
                } else {
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(code.len());
                        code.push(Inst::Jmp(0));
                        self.emit(node, masks, code);
                    }
                    let out = code.len();
                    for s in splits {
                        code[s] = choice(s + 1, out);
                    }
                }
            }
            Node::Look { node, negate } => {
                let program = self.program(node, masks);
                code.push(Inst::Look { program, negate: *negate });
            }
        }
    }
}

/// A compiled split regex.
pub struct Pattern {
    table: Table,
    programs: Vec<Vec<Inst>>,
    first: u64,
    can_be_empty: bool,
}

#[inline(always)]
fn decode(text: &[u8], pos: usize) -> (u32, usize) {
    let b0 = text[pos] as u32;
    if b0 < 0x80 {
        return (b0, 1);
    }
    if b0 < 0xE0 {
        return (((b0 & 0x1F) << 6) | (text[pos + 1] as u32 & 0x3F), 2);
    }
    if b0 < 0xF0 {
        return (((b0 & 0x0F) << 12) | ((text[pos + 1] as u32 & 0x3F) << 6)
                | (text[pos + 2] as u32 & 0x3F), 3);
    }
    (((b0 & 0x07) << 18) | ((text[pos + 1] as u32 & 0x3F) << 12)
        | ((text[pos + 2] as u32 & 0x3F) << 6) | (text[pos + 3] as u32 & 0x3F), 4)
}

#[inline(always)]
fn char_len(first: u8) -> usize {
    if first < 0x80 { 1 } else if first < 0xE0 { 2 } else if first < 0xF0 { 3 } else { 4 }
}

#[inline(always)]
fn back_one(text: &[u8], mut pos: usize) -> usize {
    pos -= 1;
    while text[pos] & 0xC0 == 0x80 {
        pos -= 1;
    }
    pos
}

impl Pattern {
    /// Compiles `regex` (Oniguruma's Ruby syntax); Err(why) outside the subset. Atom
    /// members are cached under `cache_dir`.
    pub fn new(regex: &str, cache_dir: Option<&Path>) -> Result<Pattern, String> {
        // Oniguruma must take the pattern as a whole (its syntax errors are its own).
        onig::Regex::new(regex).map_err(|e| format!("Oniguruma refuses the pattern: {e}"))?;
        let mut atoms = Vec::new();
        let mut ids = HashMap::new();
        let mut parser = Parser { chars: regex.chars().collect(), at: 0, atoms: &mut atoms, ids: &mut ids,
                                 interval_end: 0 };
        let node = parser.alternation(false)?;
        if parser.at != parser.chars.len() {
            return Err("an unmatched ')'".into());
        }
        check_folded_runs(&node, &atoms, cache_dir)?;
        let mut members = Vec::with_capacity(atoms.len());
        for atom in &atoms {
            members.push(literal_members(atom).map_or_else(|| classes::members(atom, cache_dir), Ok)?);
        }
        let masks: Vec<u64> = (0..atoms.len()).map(|k| 1u64 << k).collect();
        let mut compiler = Compiler { programs: Vec::new() };
        compiler.program(&node, &masks);
        Ok(Pattern {
            table: Table::new(&members),
            programs: compiler.programs,
            first: first_mask(&node),
            can_be_empty: nullable(&node),
        })
    }

    /// The end of the match starting at `start` (within `text[..end]`), if any.
    fn match_at(&self, program: usize, text: &[u8], start: usize, end: usize,
                stack: &mut Vec<Frame>) -> Option<usize> {
        let code = &self.programs[program];
        let base = stack.len();
        let mut pc = 0usize;
        let mut pos = start;
        let table = &self.table;
        loop {
            let ok = match code[pc] {
                Inst::Atom(mask) => {
                    if pos < end {
                        let (cp, len) = decode(text, pos);
                        if table.get(cp) & mask != 0 {
                            pos += len;
                            pc += 1;
                            true
                        } else { false }
                    } else { false }
                }
                Inst::Run { mask, min, max, greedy } => {
                    let mut count = 0u32;
                    let mut floor = pos;
                    let limit = if greedy { max } else { min };
                    while count < limit && pos < end {
                        let (cp, len) = decode(text, pos);
                        if table.get(cp) & mask == 0 {
                            break;
                        }
                        pos += len;
                        count += 1;
                        if count == min {
                            floor = pos;
                        }
                    }
                    if count < min {
                        false
                    } else {
                        if min == 0 {
                            floor = if greedy { floor } else { pos };
                        }
                        if greedy {
                            if pos > floor {
                                stack.push(Frame::Shrink { pc: pc + 1, floor, pos });
                            }
                        } else if max > min {
                            stack.push(Frame::Grow { pc: pc + 1, pos, room: max - min, mask });
                        }
                        pc += 1;
                        true
                    }
                }
                Inst::Split(a, b) => {
                    stack.push(Frame::Alt { pc: b, pos });
                    pc = a;
                    true
                }
                Inst::Jmp(a) => {
                    pc = a;
                    true
                }
                Inst::Look { program, negate } => {
                    let mut inner = Vec::new();
                    let found = self.match_at(program, text, pos, end, &mut inner).is_some();
                    if found != negate {
                        pc += 1;
                        true
                    } else { false }
                }
                Inst::Match => {
                    stack.truncate(base);
                    return Some(pos);
                }
            };
            if ok {
                continue;
            }
            // Backtrack to the latest choice.
            loop {
                if stack.len() == base {
                    return None;
                }
                match stack.pop().unwrap() {
                    Frame::Alt { pc: p, pos: q } => {
                        pc = p;
                        pos = q;
                        break;
                    }
                    Frame::Shrink { pc: p, floor, pos: q } => {
                        let shorter = back_one(text, q);
                        if shorter > floor {
                            stack.push(Frame::Shrink { pc: p, floor, pos: shorter });
                        }
                        pc = p;
                        pos = shorter;
                        break;
                    }
                    Frame::Grow { pc: p, pos: q, room, mask } => {
                        if q < end {
                            let (cp, len) = decode(text, q);
                            if table.get(cp) & mask != 0 {
                                if room > 1 {
                                    stack.push(Frame::Grow { pc: p, pos: q + len, room: room - 1, mask });
                                }
                                pc = p;
                                pos = q + len;
                                break;
                            }
                        }
                    }
                }
            }
        }
    }

    /// Oniguruma's `find_iter` over `text[start..end]` (as `onig::FindMatches` walks it:
    /// an empty match right after the previous match moves the search one character
    /// on), each match's byte range passed to `found`.
    pub fn find_iter(&self, text: &[u8], start: usize, end: usize, stack: &mut Vec<Frame>,
                     mut found: impl FnMut(usize, usize)) {
        let mut last_end = start;
        let mut last_match: Option<usize> = None;
        loop {
            if last_end > end {
                return;
            }
            let mut at = last_end;
            let hit = loop {
                if at < end {
                    let (cp, len) = decode(text, at);
                    if self.can_be_empty || self.table.get(cp) & self.first != 0 {
                        if let Some(e) = self.match_at(0, text, at, end, stack) {
                            break Some((at, e));
                        }
                    }
                    at += len;
                } else {
                    if self.can_be_empty {
                        if let Some(e) = self.match_at(0, text, at, end, stack) {
                            break Some((at, e));
                        }
                    }
                    break None;
                }
            };
            let Some((s, e)) = hit else { return };
            if s == e && last_match == Some(e) {
                last_end += if last_end < end { char_len(text[last_end]) } else { 1 };
                continue;
            }
            last_end = e;
            last_match = Some(e);
            found(s, e);
        }
    }
}

/// The members of a literal character written as itself and matched without case
/// folding: that character alone (no need to ask Oniguruma).
fn literal_members(atom: &str) -> Option<classes::Ranges> {
    let inner = atom.strip_prefix("(?-i:")?.strip_suffix(')')?;
    let mut chars = inner.chars();
    let c = chars.next()?;
    if chars.next().is_some() || "\\[.".contains(c) {
        return None;
    }
    Some(vec![(c as u32, c as u32)])
}

/// Oniguruma folds case over strings as well as characters: under `(?i)`, "ss" matches
/// "ß" and "ff" matches "ﬀ". Every run of two or more case-folded literals in a row is
/// asked whether any single character matches it whole; if one does, the pattern is
/// refused (the matcher folds one character at a time).
fn check_folded_runs(node: &Node, atoms: &[String], cache_dir: Option<&Path>) -> Result<(), String> {
    fn literal(atoms: &[String], node: &Node) -> Option<String> {
        if let Node::Atom(id) = node {
            let inner = atoms[*id].strip_prefix("(?i:")?.strip_suffix(')')?;
            let mut chars = inner.chars();
            let c = chars.next()?;
            if chars.next().is_none() && c.is_ascii_alphanumeric() {
                return Some(c.to_string());
            }
        }
        None
    }
    match node {
        Node::Seq(items) => {
            let mut run = String::new();
            for k in 0..=items.len() {
                if let Some(c) = items.get(k).and_then(|item| literal(atoms, item)) {
                    run.push_str(&c);
                    continue;
                }
                if run.chars().count() >= 2 && classes::folds_to_one_character(&run, cache_dir)? {
                    return Err(format!("case folding of {run:?} matches a single character"));
                }
                run.clear();
                if let Some(item) = items.get(k) {
                    check_folded_runs(item, atoms, cache_dir)?;
                }
            }
            Ok(())
        }
        Node::Alt(branches) => branches.iter().try_for_each(|b| check_folded_runs(b, atoms, cache_dir)),
        Node::Repeat { node, .. } | Node::Look { node, .. } => check_folded_runs(node, atoms, cache_dir),
        Node::Atom(_) => Ok(()),
    }
}
