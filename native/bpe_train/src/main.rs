//! Trains a Hugging Face BPE model from a table of summed word counts.
//!
//! `tokenizers`' Python `train_from_iterator` counts the words of the text itself, in one
//! process; this runs the same crate's `BpeTrainer::do_train` (built from the sdist of the
//! venv's `tokenizers`, `tools/build_bpe_train.sh`) on the counts a Beam pipeline summed,
//! so the vocabulary and merges are the trainer's own.
//!
//! usage: bpe_train --version
//!        bpe_train TRAINER_JSON MODEL_JSON OUT_MODEL_JSON COUNTS...
//!   TRAINER_JSON: the Python trainer's state (`BpeTrainer.__getstate__()`)
//!   MODEL_JSON:   the untrained model's state (`BPE(...).__getstate__()`)
//!   OUT_MODEL_JSON: the trained model, as `tokenizers` serializes it
//!   COUNTS:       files of records (u32 LE byte length, UTF-8 word, u64 LE count)
//!
//! On success it prints `largest COUNT PAIR`, the most frequent pair of characters.
//! Exit 3 (and a line `overflow COUNT PAIR` on stderr) when a pair of characters occurs
//! more often than the trainer's 32-bit pair counts hold: the crate would wrap silently.
//! Exit 4 (and `tie COUNT LIMIT_NONE LIMIT_ALL CHARS`) when `limit_alphabet` cuts among characters of equal
//! count: the crate would pick by hash order.
use std::fs;
use std::process::ExitCode;

use ahash::{AHashMap, AHashSet};
use compact_str::CompactString;
use tokenizers::models::bpe::{BpeTrainer, BPE};
use tokenizers::models::{ModelWrapper, TrainerWrapper};

const VERSION: &str = env!("BPE_TRAIN_TOKENIZERS_VERSION");

fn read_counts(path: &str, counts: &mut AHashMap<CompactString, u64>) -> Result<(), String> {
    let data = fs::read(path).map_err(|e| format!("{path}: {e}"))?;
    let mut at = 0usize;
    while at < data.len() {
        if at + 4 > data.len() {
            return Err(format!("{path}: a record cut short at byte {at}"));
        }
        let len = u32::from_le_bytes(data[at..at + 4].try_into().unwrap()) as usize;
        at += 4;
        if at + len + 8 > data.len() {
            return Err(format!("{path}: a record cut short at byte {at}"));
        }
        let word = std::str::from_utf8(&data[at..at + len])
            .map_err(|e| format!("{path}: a word that is not UTF-8 at byte {at}: {e}"))?;
        at += len;
        let count = u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        at += 8;
        if counts.insert(CompactString::from(word), count).is_some() {
            return Err(format!("{path}: the word {word:?} is listed twice"));
        }
    }
    Ok(())
}

/// The characters the trainer keeps (`compute_alphabet`): all, unless `limit_alphabet`
/// cuts the least frequent. The crate sorts them by count with an unstable sort over a
/// hash map, so equal counts at the cut are kept or dropped by hash order: that is an
/// `Err((count, chars, the limits that keep none of them and all of them))` here, never
/// a silent pick.
fn kept_alphabet(
    trainer: &BpeTrainer,
    counts: &AHashMap<CompactString, u64>,
) -> Result<AHashSet<char>, (usize, Vec<char>, usize, usize)> {
    let mut alphabet: AHashMap<char, usize> = AHashMap::new();
    for (word, count) in counts {
        for c in word.chars() {
            *alphabet.entry(c).or_default() += *count as usize;
        }
    }
    for c in &trainer.initial_alphabet {
        alphabet.insert(*c, usize::MAX);
    }
    let to_remove = trainer
        .limit_alphabet
        .map(|limit| alphabet.len().saturating_sub(limit))
        .unwrap_or(0);
    if to_remove == 0 {
        return Ok(alphabet.into_keys().collect());
    }
    let mut sorted: Vec<(char, usize)> = alphabet.into_iter().collect();
    sorted.sort_by_key(|&(c, n)| (n, c));
    let cut = sorted[to_remove - 1].1;
    if to_remove < sorted.len() && sorted[to_remove].1 == cut {
        let tied: Vec<char> = sorted.iter().filter(|(_, n)| *n == cut).map(|(c, _)| *c).collect();
        let above = sorted.iter().filter(|(_, n)| *n > cut).count();
        return Err((cut, tied.clone(), above, above + tied.len()));
    }
    Ok(sorted[to_remove..].iter().map(|(c, _)| *c).collect())
}

/// The most frequent pair of adjacent kept characters, counted in 64 bits. The trainer
/// counts pairs in `i32`; a merged token occurs at most as often as the pair it was made
/// from, so when no pair of characters exceeds `i32::MAX` no later pair does either.
fn largest_pair(
    counts: &AHashMap<CompactString, u64>,
    kept: &AHashSet<char>,
) -> Option<((char, char), u64)> {
    let mut pairs: AHashMap<(char, char), u64> = AHashMap::new();
    for (word, count) in counts {
        let mut last: Option<char> = None;
        for c in word.chars().filter(|c| kept.contains(c)) {
            if let Some(a) = last {
                *pairs.entry((a, c)).or_default() += *count;
            }
            last = Some(c);
        }
    }
    pairs.into_iter().max_by_key(|(pair, count)| (*count, std::cmp::Reverse(*pair)))
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    if args.len() == 2 && args[1] == "--version" {
        println!("{VERSION}");
        return Ok(ExitCode::SUCCESS);
    }
    if args.len() < 5 {
        return Err("usage: bpe_train TRAINER_JSON MODEL_JSON OUT_MODEL_JSON COUNTS...".into());
    }
    let text = |p: &str| fs::read_to_string(p).map_err(|e| format!("{p}: {e}"));
    let trainer: TrainerWrapper =
        serde_json::from_str(&text(&args[1])?).map_err(|e| format!("{}: {e}", args[1]))?;
    let TrainerWrapper::BpeTrainer(trainer) = trainer else {
        return Err(format!("{}: not a BpeTrainer", args[1]));
    };
    let model: ModelWrapper =
        serde_json::from_str(&text(&args[2])?).map_err(|e| format!("{}: {e}", args[2]))?;
    let ModelWrapper::BPE(mut model) = model else {
        return Err(format!("{}: not a BPE model", args[2]));
    };
    let mut counts = AHashMap::new();
    for path in &args[4..] {
        read_counts(path, &mut counts)?;
    }
    let kept = match kept_alphabet(&trainer, &counts) {
        Ok(kept) => kept,
        Err((count, tied, none, all)) => {
            let shown: String = tied.iter().collect();
            eprintln!("tie {count} {none} {all} {}", serde_json::to_string(&shown).unwrap());
            return Ok(ExitCode::from(4));
        }
    };
    if let Some(((a, b), count)) = largest_pair(&counts, &kept) {
        let pair = serde_json::to_string(&format!("{a}{b}")).unwrap();
        if count > i32::MAX as u64 {
            eprintln!("overflow {count} {pair}");
            return Ok(ExitCode::from(3));
        }
        println!("largest {count} {pair}");
    }
    trainer.do_train(&counts, &mut model).map_err(|e| format!("training: {e}"))?;
    drop(counts);
    let out: ModelWrapper = <BPE as Into<ModelWrapper>>::into(model);
    let json = serde_json::to_string(&out).map_err(|e| format!("serializing: {e}"))?;
    let tmp = format!("{}.tmp", args[3]);
    fs::write(&tmp, json).map_err(|e| format!("{tmp}: {e}"))?;
    fs::rename(&tmp, &args[3]).map_err(|e| format!("{}: {e}", args[3]))?;
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match run(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bpe_train: {e}");
            ExitCode::from(1)
        }
    }
}
