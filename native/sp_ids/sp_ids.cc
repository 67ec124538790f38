// Ids of SentencePiece text without the SentencePieceText protobuf.
//
// sentencepiece's id call fills a SentencePieceText (every piece's text and surface
// copied into arena strings), reads the ids out of it and frees it: about half of the
// instructions of an encode. This module runs the same library's Normalizer and model
// (built from the sdist of the installed sentencepiece, `tools/build_sp_ids.sh`) and
// takes the ids from the model's result as the processor does: control ids kept,
// unknown pieces as their bytes under byte fallback, a run of unknown pieces as one id.
// `sp_native.py` checks it against sentencepiece before any build uses it.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model_factory.h"
#include "model_interface.h"
#include "normalizer.h"
#include "sentencepiece_model.pb.h"

#ifndef SP_IDS_SENTENCEPIECE_VERSION
#error "build with -DSP_IDS_SENTENCEPIECE_VERSION=\"x.y.z\" (tools/build_sp_ids.sh)"
#endif

namespace {

namespace spm = sentencepiece;
using Piece = spm::ModelProto::SentencePiece;

struct Engine {
  spm::ModelProto proto;
  std::unique_ptr<spm::ModelInterface> model;
  std::unique_ptr<spm::normalizer::Normalizer> normalizer;
  std::vector<char> control, unknown;  // by id
  std::vector<int> byte_ids;            // <0xXX> ids under byte fallback
  bool byte_fallback = false;
};

const char kCapsule[] = "mintdim_beam.sp_ids.Engine";

void EngineFree(PyObject *capsule) {
  delete static_cast<Engine *>(PyCapsule_GetPointer(capsule, kCapsule));
}

PyObject *Load(PyObject *, PyObject *args) {
  const char *data;
  Py_ssize_t size;
  if (!PyArg_ParseTuple(args, "y#", &data, &size)) return nullptr;
  auto engine = std::make_unique<Engine>();
  if (!engine->proto.ParseFromArray(data, static_cast<int>(size))) {
    PyErr_SetString(PyExc_ValueError, "not a SentencePiece model");
    return nullptr;
  }
  engine->model = spm::ModelFactory::Create(engine->proto);
  if (engine->model == nullptr || !engine->model->status().ok()) {
    PyErr_SetString(PyExc_ValueError, "sentencepiece refused the model");
    return nullptr;
  }
  engine->normalizer = std::make_unique<spm::normalizer::Normalizer>(
      engine->proto.normalizer_spec(), engine->proto.trainer_spec());
  if (!engine->normalizer->status().ok()) {
    PyErr_SetString(PyExc_ValueError, "sentencepiece refused the normalizer");
    return nullptr;
  }
  engine->normalizer->SetPrefixMatcher(engine->model->prefix_matcher());
  const int pieces = engine->proto.pieces_size();
  engine->control.resize(pieces);
  engine->unknown.resize(pieces);
  for (int i = 0; i < pieces; ++i) {
    const auto type = engine->proto.pieces(i).type();
    engine->control[i] = type == Piece::CONTROL;
    engine->unknown[i] = type == Piece::UNKNOWN;
  }
  engine->byte_fallback = engine->model->ByteFallbackEnabled();
  engine->byte_ids.assign(256, -1);
  if (engine->byte_fallback) {
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      engine->byte_ids[b] = engine->model->PieceToId(name);
    }
  }
  return PyCapsule_New(engine.release(), kCapsule, EngineFree);
}

// One text's ids; false when sentencepiece reports an error (the caller falls back).
bool EncodeOne(const Engine &engine, const std::string &text, std::string *normalized,
               std::vector<size_t> *offsets, std::vector<int> *ids) {
  normalized->clear();
  offsets->clear();
  if (!engine.normalizer->Normalize(text, normalized, offsets).ok()) return false;
  const auto result = engine.model->Encode(*normalized);
  const int pieces = static_cast<int>(engine.control.size());
  bool previous_unknown = false;
  for (const auto &piece : result) {
    const int id = piece.second;
    if (id < 0 || id >= pieces || piece.first.empty()) return false;
    const bool unknown = engine.unknown[id];
    if (engine.control[id]) {
      ids->push_back(id);
    } else if (unknown && engine.byte_fallback) {
      for (const unsigned char b : piece.first) {
        if (engine.byte_ids[b] < 0) return false;
        ids->push_back(engine.byte_ids[b]);
      }
    } else if (!(unknown && previous_unknown)) {
      ids->push_back(id);
    }
    previous_unknown = unknown;
  }
  return true;
}

PyObject *Encode(PyObject *, PyObject *args) {
  PyObject *capsule, *texts;
  int threads;
  if (!PyArg_ParseTuple(args, "OOi", &capsule, &texts, &threads)) return nullptr;
  auto *engine = static_cast<Engine *>(PyCapsule_GetPointer(capsule, kCapsule));
  if (engine == nullptr) return nullptr;
  PyObject *sequence = PySequence_Fast(texts, "texts must be a sequence of str");
  if (sequence == nullptr) return nullptr;
  const Py_ssize_t count = PySequence_Fast_GET_SIZE(sequence);
  std::vector<std::string> input(count);
  for (Py_ssize_t i = 0; i < count; ++i) {
    Py_ssize_t size;
    const char *text = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(sequence, i), &size);
    if (text == nullptr) {
      Py_DECREF(sequence);
      return nullptr;
    }
    input[i].assign(text, size);
  }
  Py_DECREF(sequence);
  std::vector<std::vector<int>> output(count);
  std::vector<char> failed(count, 0);
  Py_BEGIN_ALLOW_THREADS
  auto run = [&](Py_ssize_t begin, Py_ssize_t end) {
    std::string normalized;
    std::vector<size_t> offsets;
    for (Py_ssize_t i = begin; i < end; ++i) {
      failed[i] = !EncodeOne(*engine, input[i], &normalized, &offsets, &output[i]);
    }
  };
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 1 || count < 2 * threads) {
    run(0, count);
  } else {
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back(run, count * t / threads, count * (t + 1) / threads);
    }
    for (auto &worker : workers) worker.join();
  }
  Py_END_ALLOW_THREADS
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (failed[i]) {
      PyErr_Format(PyExc_RuntimeError, "sentencepiece could not encode text %zd", i);
      return nullptr;
    }
  }
  PyObject *lists = PyList_New(count);
  if (lists == nullptr) return nullptr;
  for (Py_ssize_t i = 0; i < count; ++i) {
    PyObject *ids = PyList_New(static_cast<Py_ssize_t>(output[i].size()));
    if (ids == nullptr) {
      Py_DECREF(lists);
      return nullptr;
    }
    for (size_t k = 0; k < output[i].size(); ++k) {
      PyList_SET_ITEM(ids, k, PyLong_FromLong(output[i][k]));
    }
    PyList_SET_ITEM(lists, i, ids);
  }
  return lists;
}

PyMethodDef kMethods[] = {
    {"load", Load, METH_VARARGS, "load(model bytes) -> engine"},
    {"encode", Encode, METH_VARARGS, "encode(engine, texts, threads) -> list of id lists"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "sp_ids",
                       "SentencePiece ids without the SentencePieceText protobuf.", -1,
                       kMethods};

}  // namespace

PyMODINIT_FUNC PyInit_sp_ids(void) {
  PyObject *module = PyModule_Create(&kModule);
  if (module != nullptr) {
    PyModule_AddStringConstant(module, "SENTENCEPIECE_VERSION", SP_IDS_SENTENCEPIECE_VERSION);
  }
  return module;
}
