//! The normalizers a BPE tokenizer.json may name that are reproduced exactly: Unicode
//! forms through the crate `tokenizers` itself uses (unicode-normalization-alignments,
//! the same tables), and the literal `Prepend` and `Replace` of Llama 2 style files.

use unicode_normalization_alignments::UnicodeNormalization;

#[derive(Debug, Clone)]
pub enum Normalizer {
    Nfc,
    Nfkc,
    Nfd,
    Nfkd,
    Prepend(String),
    Replace { from: String, to: String },
}

impl Normalizer {
    pub fn from_json(v: &serde_json::Value) -> Result<Normalizer, String> {
        let kind = v["kind"].as_str().ok_or("a normalizer without kind")?;
        let text = |key: &str| v[key].as_str().map(str::to_owned).ok_or_else(|| format!("{kind} without {key}"));
        Ok(match kind {
            "NFC" => Normalizer::Nfc,
            "NFKC" => Normalizer::Nfkc,
            "NFD" => Normalizer::Nfd,
            "NFKD" => Normalizer::Nfkd,
            "Prepend" => Normalizer::Prepend(text("prepend")?),
            "Replace" => {
                let from = text("from")?;
                if from.is_empty() {
                    return Err("Replace of the empty string".into());
                }
                Normalizer::Replace { from, to: text("to")? }
            }
            other => return Err(format!("the normalizer {other}")),
        })
    }

    fn apply(&self, text: &str) -> Option<String> {
        match self {
            Normalizer::Nfc | Normalizer::Nfkc | Normalizer::Nfd | Normalizer::Nfkd => {
                if text.is_ascii() {
                    return None; // every form leaves ASCII as it is
                }
                Some(match self {
                    Normalizer::Nfc => text.nfc().map(|(c, _)| c).collect(),
                    Normalizer::Nfkc => text.nfkc().map(|(c, _)| c).collect(),
                    Normalizer::Nfd => text.nfd().map(|(c, _)| c).collect(),
                    _ => text.nfkd().map(|(c, _)| c).collect(),
                })
            }
            Normalizer::Prepend(prefix) => {
                if text.is_empty() { None } else { Some(format!("{prefix}{text}")) }
            }
            Normalizer::Replace { from, to } => {
                if text.contains(from.as_str()) { Some(text.replace(from.as_str(), to)) } else { None }
            }
        }
    }
}

/// `text` through every normalizer in order.
pub fn normalize(normalizers: &[Normalizer], text: &str) -> String {
    let mut current: Option<String> = None;
    for n in normalizers {
        let input = current.as_deref().unwrap_or(text);
        if let Some(changed) = n.apply(input) {
            current = Some(changed);
        }
    }
    current.unwrap_or_else(|| text.to_owned())
}
