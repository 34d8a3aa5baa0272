// The constraint language: scalar text, the tokenizer and the parser (evaluation:
// constraint_eval.cpp).
#include "fib/trace/constraint.h"

#include <fmt/format.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "trace/constraint_node.h"

namespace fib {

std::string scalar_to_string(const Scalar& s) {
  if (const auto* i = std::get_if<std::int64_t>(&s)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&s)) return *b ? "True" : "False";
  // Python's repr: an integral float keeps its ".0" (2.0, not 2), so a float never reads as an
  // int in a message ("value 2.0 does not fit dtype int32").
  std::string out = fmt::format("{}", std::get<double>(s));
  if (out.find_first_of(".en") == std::string::npos) out += ".0";  // not 1e+16, inf, nan
  return out;
}

namespace {

using NodePtr = std::shared_ptr<const ConstraintNode>;
using Node = ConstraintNode;

// Deeper nesting (parentheses, unary chains, or a tree this tall) is refused: parsing and
// evaluation recurse, and a hostile definition must not exhaust the stack.
constexpr int kMaxDepth = 200;

// ---------------------------------------------------------------- tokenizer
enum class Tok { kEnd, kIdent, kInt, kFloat, kOp };
struct Token {
  Tok kind = Tok::kEnd;
  std::string text;
  std::size_t col = 0;  // 1-based
};

struct SyntaxError : std::runtime_error {
  std::size_t col;
  SyntaxError(std::size_t c, const std::string& m) : std::runtime_error(m), col(c) {}
};

std::vector<Token> tokenize(std::string_view s) {
  std::vector<Token> out;
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (c == ' ' || c == '\t') {
      ++i;
      continue;
    }
    Token t;
    t.col = i + 1;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      std::size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      t.kind = Tok::kIdent;
      t.text = std::string(s.substr(i, j - i));
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() &&
                std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      std::size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j < s.size() && s[j] == '.') {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        std::size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      t.kind = is_float ? Tok::kFloat : Tok::kInt;
      for (char ch : s.substr(i, j - i)) {
        if (ch != '_') t.text += ch;
      }
      i = j;
    } else {
      static constexpr std::string_view kTwo[] = {"**", "//", "==", "!=", "<=", ">="};
      t.kind = Tok::kOp;
      bool matched = false;
      for (auto op : kTwo) {
        if (s.substr(i, 2) == op) {
          t.text = std::string(op);
          i += 2;
          matched = true;
          break;
        }
      }
      if (!matched) {
        static constexpr std::string_view kOne = "+-*/%<>()[].,";
        if (kOne.find(c) == std::string_view::npos) {
          throw SyntaxError(i + 1, fmt::format("unexpected character '{}'", c));
        }
        t.text = std::string(1, c);
        ++i;
      }
    }
    out.push_back(std::move(t));
  }
  Token end;
  end.kind = Tok::kEnd;
  end.col = s.size() + 1;
  out.push_back(end);
  return out;
}

// ---------------------------------------------------------------- parser
class Parser {
 public:
  Parser(std::string_view src, std::vector<Token> toks) : src_(src), toks_(std::move(toks)) {}

  NodePtr parse() {
    NodePtr n = parse_or();
    if (peek().kind != Tok::kEnd) {
      throw SyntaxError(peek().col,
                        fmt::format("unexpected '{}' after the expression", peek().text));
    }
    return n;
  }

 private:
  const Token& peek() const { return toks_[pos_]; }
  bool is_op(std::string_view op) const { return peek().kind == Tok::kOp && peek().text == op; }
  bool is_kw(std::string_view kw) const { return peek().kind == Tok::kIdent && peek().text == kw; }
  void expect_op(std::string_view op) {
    if (!is_op(op)) {
      const std::string found =
          peek().kind == Tok::kEnd ? "end of expression" : "'" + peek().text + "'";
      throw SyntaxError(peek().col, fmt::format("expected '{}', found {}", op, found));
    }
    ++pos_;
  }
  std::size_t start_col() const { return peek().col; }
  std::string text_from(std::size_t col) const {
    std::size_t end = toks_[pos_ - 1].col - 1 + toks_[pos_ - 1].text.size();
    std::string s(src_.substr(col - 1, end - (col - 1)));
    return s;
  }
  NodePtr make(Node n, std::size_t col) {
    for (const auto& k : n.kids) n.depth = std::max(n.depth, k->depth + 1);
    if (n.depth > kMaxDepth) {
      throw SyntaxError(col, fmt::format("the expression nests deeper than {} levels", kMaxDepth));
    }
    n.src = text_from(col);
    return std::make_shared<const Node>(std::move(n));
  }

  // Counts recursive descent into parse_or/parse_not/parse_unary.
  struct Nest {
    Nest(Parser& p, std::size_t col) : p_(p) {
      if (++p_.nesting_ > kMaxDepth) {
        throw SyntaxError(col,
                          fmt::format("the expression nests deeper than {} levels", kMaxDepth));
      }
    }
    ~Nest() { --p_.nesting_; }
    Nest(const Nest&) = delete;
    Nest& operator=(const Nest&) = delete;
    Parser& p_;
  };

  NodePtr parse_or() {
    const std::size_t c = start_col();
    const Nest nest(*this, c);
    NodePtr l = parse_and();
    while (is_kw("or")) {
      ++pos_;
      Node n;
      n.kind = Node::Kind::kOr;
      n.kids = {l, parse_and()};
      l = make(std::move(n), c);
    }
    return l;
  }
  NodePtr parse_and() {
    const std::size_t c = start_col();
    NodePtr l = parse_not();
    while (is_kw("and")) {
      ++pos_;
      Node n;
      n.kind = Node::Kind::kAnd;
      n.kids = {l, parse_not()};
      l = make(std::move(n), c);
    }
    return l;
  }
  NodePtr parse_not() {
    const std::size_t c = start_col();
    const Nest nest(*this, c);
    if (is_kw("not")) {
      ++pos_;
      Node n;
      n.kind = Node::Kind::kNot;
      n.kids = {parse_not()};
      return make(std::move(n), c);
    }
    return parse_compare();
  }
  NodePtr parse_compare() {
    const std::size_t c = start_col();
    NodePtr l = parse_arith();
    static constexpr std::string_view kCmp[] = {"==", "!=", "<", "<=", ">", ">="};
    Node n;
    n.kind = Node::Kind::kCompare;
    n.kids.push_back(l);
    for (;;) {
      bool found = false;
      for (auto op : kCmp) {
        if (is_op(op)) {
          found = true;
          ++pos_;
          n.ops.emplace_back(op);
          n.kids.push_back(parse_arith());
          break;
        }
      }
      if (!found) break;
    }
    if (n.ops.empty()) return l;
    return make(std::move(n), c);
  }
  NodePtr parse_arith() {
    const std::size_t c = start_col();
    NodePtr l = parse_term();
    while (is_op("+") || is_op("-")) {
      Node n;
      n.kind = Node::Kind::kBinary;
      n.name = peek().text;
      ++pos_;
      n.kids = {l, parse_term()};
      l = make(std::move(n), c);
    }
    return l;
  }
  NodePtr parse_term() {
    const std::size_t c = start_col();
    NodePtr l = parse_unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      Node n;
      n.kind = Node::Kind::kBinary;
      n.name = peek().text;
      ++pos_;
      n.kids = {l, parse_unary()};
      l = make(std::move(n), c);
    }
    return l;
  }
  NodePtr parse_unary() {
    const std::size_t c = start_col();
    const Nest nest(*this, c);
    if (is_op("-") || is_op("+")) {
      Node n;
      n.kind = is_op("-") ? Node::Kind::kNeg : Node::Kind::kPos;
      ++pos_;
      n.kids = {parse_unary()};
      return make(std::move(n), c);
    }
    return parse_power();
  }
  NodePtr parse_power() {
    const std::size_t c = start_col();
    NodePtr base = parse_postfix();
    if (is_op("**")) {
      ++pos_;
      Node n;
      n.kind = Node::Kind::kBinary;
      n.name = "**";
      n.kids = {base, parse_unary()};  // right-associative, binds tighter than unary on the left
      return make(std::move(n), c);
    }
    return base;
  }
  NodePtr parse_postfix() {
    const std::size_t c = start_col();
    NodePtr n = parse_atom();
    for (;;) {
      if (is_op("[")) {
        ++pos_;
        Node idx;
        idx.kind = Node::Kind::kIndex;
        idx.kids = {n, parse_or()};
        expect_op("]");
        n = make(std::move(idx), c);
      } else if (is_op(".")) {
        ++pos_;
        if (peek().kind != Tok::kIdent) {
          throw SyntaxError(peek().col, "expected an attribute name after '.'");
        }
        Node a;
        a.kind = Node::Kind::kAttr;
        a.name = peek().text;
        ++pos_;
        a.kids = {n};
        if (is_op("(")) {  // method call: only argument-less methods are supported
          ++pos_;
          a.kind = Node::Kind::kMethod;
          if (!is_op(")")) a.kids.push_back(parse_or());
          expect_op(")");
        }
        n = make(std::move(a), c);
      } else {
        return n;
      }
    }
  }
  NodePtr parse_atom() {
    const std::size_t c = start_col();
    const Token& t = peek();
    Node n;
    switch (t.kind) {
      case Tok::kInt:
        n.kind = Node::Kind::kInt;
        try {
          n.ival = std::stoll(t.text);
        } catch (const std::exception&) {
          throw SyntaxError(t.col, fmt::format("integer '{}' is out of range", t.text));
        }
        ++pos_;
        return make(std::move(n), c);
      case Tok::kFloat:
        n.kind = Node::Kind::kFloat;
        // strtod, not stod: out-of-range literals become inf or 0 as in Python, not a throw.
        n.fval = std::strtod(t.text.c_str(), nullptr);
        ++pos_;
        return make(std::move(n), c);
      case Tok::kIdent: {
        if (t.text == "True" || t.text == "False") {
          n.kind = Node::Kind::kBool;
          n.bval = t.text == "True";
          ++pos_;
          return make(std::move(n), c);
        }
        if (t.text == "and" || t.text == "or" || t.text == "not") {
          throw SyntaxError(t.col, fmt::format("unexpected keyword '{}'", t.text));
        }
        std::string name = t.text;
        ++pos_;
        if (is_op("(")) {  // function call: len, min, max, abs, int, float
          ++pos_;
          n.kind = Node::Kind::kCall;
          n.name = name;
          if (!is_op(")")) {
            n.kids.push_back(parse_or());
            while (is_op(",")) {
              ++pos_;
              n.kids.push_back(parse_or());
            }
          }
          expect_op(")");
          static constexpr std::string_view kFuncs[] = {"len", "min", "max", "abs", "int", "float"};
          bool known = false;
          for (auto f : kFuncs) known = known || f == name;
          if (!known) {
            throw SyntaxError(c,
                              fmt::format("unknown function '{}' (supported: len, min, max, abs, "
                                          "int, float)",
                                          name));
          }
          return make(std::move(n), c);
        }
        n.kind = Node::Kind::kName;
        n.name = std::move(name);
        return make(std::move(n), c);
      }
      case Tok::kOp:
        if (t.text == "(") {
          ++pos_;
          NodePtr inner = parse_or();
          expect_op(")");
          return inner;
        }
        throw SyntaxError(t.col, fmt::format("unexpected '{}'", t.text));
      case Tok::kEnd:
        throw SyntaxError(t.col, "unexpected end of expression");
    }
    throw SyntaxError(t.col, "unexpected token");
  }

  std::string_view src_;
  std::vector<Token> toks_;
  std::size_t pos_ = 0;
  int nesting_ = 0;
};

void collect_names(const Node& n, std::vector<std::string>& out) {
  if (n.kind == Node::Kind::kName) {
    for (const auto& e : out) {
      if (e == n.name) return;
    }
    out.push_back(n.name);
    return;
  }
  for (const auto& k : n.kids) collect_names(*k, out);
}

}  // namespace

std::optional<Constraint> Constraint::parse(std::string_view text, std::string* error) {
  try {
    Parser p(text, tokenize(text));
    Constraint c;
    c.root_ = p.parse();
    c.text_ = std::string(text);
    collect_names(*c.root_, c.names_);
    return c;
  } catch (const SyntaxError& e) {
    if (error) *error = fmt::format("column {}: {}", e.col, e.what());
    return std::nullopt;
  }
}

}  // namespace fib
