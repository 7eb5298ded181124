// One exception type for every user-facing failure: its message is the one line a front end
// prints. The library throws nothing else on bad input (files, flags, sizes). Its kind says what
// went wrong, for bindings that have their own exception types (Python: ValueError, OSError,
// RuntimeError).
//
// The library speaks in its own terms: a message names the inputs it is about as fields (the
// library's name of a parameter, "batch", "n", "device", and the value given where the message
// repeats it), and each front end says them in its own words: the command as its flags
// ("--batch", "--device tpu"), Python as its keyword arguments ("batch", "device='tpu'"), the
// server as its JSON keys (the library's names). what() is the library's: "batch", "device tpu".
#pragma once

#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tarnn {

// Words about a run's inputs: text, and the fields it names, in order.
class Message {
public:
  struct Field {
    std::string name;  // the library's: a RunOptions member, a job's parameter ("n", "first")
    std::string value; // as given, where the words repeat it; else empty
  };
  // How a front end names a field (with its value, where it has one).
  using Namer = std::function<std::string(const Field &)>;
  struct Piece {
    Piece(std::string t) : text(std::move(t)) {}
    Piece(const char *t) : text(t) {}
    Piece(Field f) : field(std::move(f)) {}
    std::string text;
    std::optional<Field> field;
  };

  Message(std::string text) : pieces_{Piece(std::move(text))} {}
  Message(const char *text) : pieces_{Piece(text)} {}
  Message(std::initializer_list<Piece> pieces) : pieces_(pieces) {}

  // The library's name of a field: "batch", "device tpu".
  static std::string own_name(const Field &f) {
    return f.value.empty() ? f.name : f.name + " " + f.value;
  }
  // The words with every field named by `name`.
  std::string said(const Namer &name) const {
    std::string s;
    for (const Piece &p : pieces_)
      s += p.field ? name(*p.field) : p.text;
    return s;
  }
  std::string text() const { return said(own_name); }
  // The field the words are about (the first they name), or null.
  const Field *subject() const {
    for (const Piece &p : pieces_)
      if (p.field)
        return &*p.field;
    return nullptr;
  }
  Message &operator+=(Piece p) {
    pieces_.push_back(std::move(p));
    return *this;
  }
  Message &append(const Message &m) {
    pieces_.insert(pieces_.end(), m.pieces_.begin(), m.pieces_.end());
    return *this;
  }

private:
  std::vector<Piece> pieces_;
};

// A field of a message: param("batch"), param("device", "tpu").
inline Message::Field param(std::string name, std::string value = "") {
  return {std::move(name), std::move(value)};
}

struct Error : std::runtime_error {
  enum class Kind {
    Invalid, // a bad argument, size or option, or a malformed file's content
    File,    // a file or folder that cannot be opened, read or written
    Runtime, // the machine: no device, a thread that would not start, memory
  };
  explicit Error(Message message, Kind kind = Kind::Invalid)
      : std::runtime_error(message.text()), kind_(kind), message_(std::move(message)) {}
  Kind kind() const { return kind_; }
  const Message &message() const { return message_; }
  // The message in a front end's words (Message::said).
  std::string said(const Message::Namer &name) const { return message_.said(name); }

private:
  Kind kind_;
  Message message_;
};

} // namespace tarnn
