//! What each single-character item of a split regex matches, asked of Oniguruma itself.
//!
//! `tokenizers` runs split regexes through Oniguruma, whose Unicode tables decide what
//! `\p{L}` or `[^\s\p{L}\p{N}]` holds. The matcher in `pattern` does not read those
//! classes: every class, escape or case-folded literal is an *atom* whose members are
//! found by searching a string of every code point with the same Oniguruma (the version
//! `tokenizers` is built with), once per machine (a cache file per atom), and kept as
//! one bit of a per-code-point mask.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Inclusive code point ranges an atom matches.
pub type Ranges = Vec<(u32, u32)>;

const MAGIC: &[u8] = b"mintdim-onig-atom 1\n";

/// Every Unicode scalar value in order (no surrogates): 4.3 MB, built on a cache miss.
fn every_code_point() -> &'static str {
    static ALL: OnceLock<String> = OnceLock::new();
    ALL.get_or_init(|| (0u32..0x110000).filter_map(char::from_u32).collect())
}

pub fn onig_version() -> String {
    onig::version().to_string()
}

/// Every scalar value but NUL, each followed by NUL: a match of ASCII letters can
/// only lie inside one character here.
fn every_code_point_apart() -> &'static str {
    static APART: OnceLock<String> = OnceLock::new();
    APART.get_or_init(|| {
        (1u32..0x110000).filter_map(char::from_u32).flat_map(|c| [c, '\0']).collect()
    })
}

/// Whether a single character matches `letters` (ASCII letters and digits) under case
/// folding as a whole: Oniguruma folds "ss" to match "ß" and "ff" to match "ﬀ".
pub fn folds_to_one_character(letters: &str, cache_dir: Option<&Path>) -> Result<bool, String> {
    let atom = format!("(?i:{letters})");
    let key = format!("{}\0apart\0{}", onig_version(), atom);
    let file = cache_dir.map(|dir| dir.join(format!("{:016x}.atom", fnv1a(key.as_bytes()))));
    if let Some(found) = file.as_deref().and_then(|path| read_cached(path, &key)) {
        return Ok(!found.is_empty());
    }
    let regex = onig::Regex::new(&atom).map_err(|e| format!("Oniguruma refuses {atom:?}: {e}"))?;
    let apart = every_code_point_apart();
    let mut found: Ranges = Vec::new();
    for (start, _) in regex.find_iter(apart) {
        let c = apart[start..].chars().next().ok_or("a match past the end")? as u32;
        found.push((c, c));
    }
    if let Some(path) = &file {
        write_cached(path, &key, &found);
    }
    Ok(!found.is_empty())
}

/// The members of `atom` (a regex matching one character, flags included, e.g.
/// `(?i:s)`), from the cache under `cache_dir` or from Oniguruma. Err when the atom does
/// not compile, or matches anything but exactly one whole character.
pub fn members(atom: &str, cache_dir: Option<&Path>) -> Result<Ranges, String> {
    let key = format!("{}\0{}", onig_version(), atom);
    let file = cache_dir.map(|dir| dir.join(format!("{:016x}.atom", fnv1a(key.as_bytes()))));
    if let Some(path) = &file {
        if let Some(found) = read_cached(path, &key) {
            return Ok(found);
        }
    }
    let found = search(atom)?;
    if let Some(path) = &file {
        write_cached(path, &key, &found); // best effort: a read-only cache only costs time
    }
    Ok(found)
}

fn search(atom: &str) -> Result<Ranges, String> {
    let regex = onig::Regex::new(atom).map_err(|e| format!("Oniguruma refuses {atom:?}: {e}"))?;
    let all = every_code_point();
    let mut out: Ranges = Vec::new();
    for (start, end) in regex.find_iter(all) {
        let c = all[start..].chars().next().ok_or("a match past the end")?;
        if end != start + c.len_utf8() {
            return Err(format!("{atom:?} matches more or less than one character"));
        }
        let cp = c as u32;
        match out.last_mut() {
            Some(last) if last.1 + 1 == cp || (last.1 == 0xD7FF && cp == 0xE000) => last.1 = cp,
            _ => out.push((cp, cp)),
        }
    }
    Ok(out)
}

fn fnv1a(data: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for &b in data {
        hash ^= b as u64;
        hash = hash.wrapping_mul(0x100000001b3);
    }
    hash
}

fn read_cached(path: &Path, key: &str) -> Option<Ranges> {
    let data = fs::read(path).ok()?;
    let rest = data.strip_prefix(MAGIC)?;
    let key_len = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    if rest.get(4..4 + key_len)? != key.as_bytes() {
        return None;
    }
    let body = &rest[4 + key_len..];
    if body.len() % 8 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() / 8);
    for pair in body.chunks_exact(8) {
        let a = u32::from_le_bytes(pair[..4].try_into().ok()?);
        let b = u32::from_le_bytes(pair[4..].try_into().ok()?);
        if a > b || b > 0x10FFFF {
            return None;
        }
        out.push((a, b));
    }
    Some(out)
}

fn write_cached(path: &Path, key: &str, ranges: &Ranges) {
    let Some(dir) = path.parent() else { return };
    if fs::create_dir_all(dir).is_err() {
        return;
    }
    let mut data = Vec::with_capacity(MAGIC.len() + 4 + key.len() + ranges.len() * 8);
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&(key.len() as u32).to_le_bytes());
    data.extend_from_slice(key.as_bytes());
    for &(a, b) in ranges {
        data.extend_from_slice(&a.to_le_bytes());
        data.extend_from_slice(&b.to_le_bytes());
    }
    // Written beside, then renamed: a reader sees the whole file or none.
    let tmp: PathBuf = path.with_extension(format!("tmp{}", std::process::id()));
    let written = fs::File::create(&tmp).and_then(|mut f| f.write_all(&data));
    if written.is_err() || fs::rename(&tmp, path).is_err() {
        let _ = fs::remove_file(&tmp);
    }
}

/// A 64-bit mask per code point (bit k: atom k matches it), stored as 256-code-point
/// blocks with equal blocks shared.
pub struct Table {
    ascii: [u64; 128],
    index: Vec<u32>,
    blocks: Vec<[u64; 256]>,
}

impl Table {
    pub fn new(atoms: &[Ranges]) -> Table {
        assert!(atoms.len() <= 64);
        let mut flat = vec![0u64; 0x110000];
        for (bit, ranges) in atoms.iter().enumerate() {
            for &(a, b) in ranges {
                for cp in a..=b {
                    flat[cp as usize] |= 1u64 << bit;
                }
            }
        }
        let mut ascii = [0u64; 128];
        ascii.copy_from_slice(&flat[..128]);
        let mut index = Vec::with_capacity(0x1100);
        let mut blocks: Vec<[u64; 256]> = Vec::new();
        let mut seen: rustc_hash::FxHashMap<Vec<u64>, u32> = Default::default();
        for chunk in flat.chunks_exact(256) {
            let id = *seen.entry(chunk.to_vec()).or_insert_with(|| {
                let mut block = [0u64; 256];
                block.copy_from_slice(chunk);
                blocks.push(block);
                (blocks.len() - 1) as u32
            });
            index.push(id);
        }
        Table { ascii, index, blocks }
    }

    #[inline(always)]
    pub fn get(&self, cp: u32) -> u64 {
        if cp < 128 {
            self.ascii[cp as usize]
        } else {
            self.blocks[self.index[(cp >> 8) as usize] as usize][(cp & 255) as usize]
        }
    }
}
