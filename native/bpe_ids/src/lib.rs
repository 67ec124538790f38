//! `bpe_ids`: Hugging Face BPE tokenizers encoded natively, for mintdim-beam.
//!
//! `Engine(tokenizer_json, config_json)` holds one tokenizer; `encode(texts, plain)`
//! gives every text's ids back to back (little-endian u32 bytes), each text's count,
//! and the indices of the texts it leaves to `tokenizers` (a lone surrogate, a
//! single_word token, an UNK token missing from the vocabulary). The GIL is released
//! while it encodes.

mod classes;
mod engine;
mod model;
mod normalize;
mod pattern;
mod pretokenize;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use std::sync::Mutex;

#[pyclass(module = "bpe_ids")]
struct Engine {
    inner: Mutex<engine::Engine>,
}

#[pymethods]
impl Engine {
    #[new]
    fn new(tokenizer_json: &[u8], config_json: &str) -> PyResult<Self> {
        let inner = engine::Engine::new(tokenizer_json, config_json).map_err(PyValueError::new_err)?;
        Ok(Engine { inner: Mutex::new(inner) })
    }

    /// (ids as little-endian u32 bytes, counts as little-endian u64 bytes, left).
    fn encode<'py>(&self, py: Python<'py>, texts: &Bound<'py, PyList>, plain: bool)
                   -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Vec<usize>)> {
        // The texts' UTF-8, copied out while the GIL is held.
        let mut joined = String::new();
        let mut bounds: Vec<Option<(usize, usize)>> = Vec::with_capacity(texts.len());
        for item in texts.iter() {
            let text = item.cast::<PyString>()?;
            match text.to_str() {
                Ok(s) => {
                    let start = joined.len();
                    joined.push_str(s);
                    bounds.push(Some((start, joined.len())));
                }
                Err(_) => bounds.push(None), // a lone surrogate: `tokenizers` reports it
            }
        }
        let engine = &self.inner;
        let (ids, counts, left) = py.detach(|| {
            let mut engine = engine.lock().unwrap();
            let mut ids: Vec<u32> = Vec::with_capacity(joined.len() / 3);
            let mut counts: Vec<u64> = Vec::with_capacity(bounds.len());
            let mut left = Vec::new();
            for (k, range) in bounds.iter().enumerate() {
                let before = ids.len();
                let done = match range {
                    Some((s, e)) => engine.encode(&joined[*s..*e], plain, &mut ids),
                    None => false,
                };
                if !done {
                    left.push(k);
                }
                counts.push((ids.len() - before) as u64);
            }
            (ids, counts, left)
        });
        let id_bytes: Vec<u8> = ids.iter().flat_map(|i| i.to_le_bytes()).collect();
        let count_bytes: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
        Ok((PyBytes::new(py, &id_bytes), PyBytes::new(py, &count_bytes), left))
    }

    fn byte_level(&self) -> bool {
        self.inner.lock().unwrap().byte_level()
    }
}

/// The Oniguruma version whose classes the split regexes use.
#[pyfunction]
fn onig_version() -> String {
    classes::onig_version()
}

#[pymodule]
fn bpe_ids(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Engine>()?;
    m.add_function(wrap_pyfunction!(onig_version, m)?)?;
    m.add("TOKENIZERS_VERSION", option_env!("BPE_IDS_TOKENIZERS_VERSION").unwrap_or("0.23.3"))?;
    Ok(())
}
