// Einsum (any equation: ellipsis, implicit output, repeated labels /
// diagonals, broadcasting; a direct loop over all labels, accumulating in
// double, threads over output elements) and Det (LU with partial pivoting).
// float32 / float64.
#include <algorithm>
#include <cmath>
#include <string>

#include "ops.hpp"

namespace nxrt::cpu {
namespace {

constexpr int kEllipsisBase = 52;  // labels 0..51 are letters, 52+ ellipsis dims

int letter_label(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

// One term ("ab...c") as labels for a tensor of rank r; ellipsis dims get
// labels kEllipsisBase + (ne - count + i) so that they right-align across terms.
std::vector<int> term_labels(const std::string& t, int64_t r, int ne, bool output) {
  std::vector<int> letters_before, letters_after;
  const size_t e = t.find("...");
  const std::string before = e == std::string::npos ? t : t.substr(0, e);
  const std::string after = e == std::string::npos ? "" : t.substr(e + 3);
  std::vector<int> out;
  for (char c : before) {
    const int l = letter_label(c);
    if (l < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Einsum: bad label '{}' in '{}'", c, t);
    out.push_back(l);
  }
  if (e != std::string::npos) {
    const int64_t count = output ? ne : r - int64_t(before.size() + after.size());
    if (count < 0 || count > ne) sdk::fail(NXRT_INVALID_ARGUMENT, "Einsum: term '{}' does not fit rank {}", t, r);
    for (int64_t i = 0; i < count; ++i) out.push_back(kEllipsisBase + int(ne - count + i));
  }
  for (char c : after) {
    const int l = letter_label(c);
    if (l < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Einsum: bad label '{}' in '{}'", c, t);
    out.push_back(l);
  }
  if (!output && int64_t(out.size()) != r) sdk::fail(NXRT_INVALID_ARGUMENT, "Einsum: term '{}' has {} labels for rank {}", t, out.size(), r);
  return out;
}

std::unique_ptr<Kernel> einsum_create(const Node& n, CpuSession& s) {
  std::string eq;
  for (char c : n.attr_string("equation", "")) if (c != ' ') eq += c;
  ThreadPool* pool = s.pool();
  return make_kernel([eq, pool](Context& ctx) {
    const size_t k = ctx.input_count();
    std::vector<ConstTensorView> in;
    for (size_t i = 0; i < k; ++i) in.push_back(ctx.input(i));
    const size_t arrow = eq.find("->");
    const std::string lhs = eq.substr(0, arrow);
    std::vector<std::string> terms;
    size_t p = 0;
    while (true) {
      const size_t c = lhs.find(',', p);
      terms.push_back(lhs.substr(p, c == std::string::npos ? std::string::npos : c - p));
      if (c == std::string::npos) break;
      p = c + 1;
    }
    if (terms.size() != k) sdk::fail(NXRT_INVALID_ARGUMENT, "Einsum: '{}' has {} terms for {} inputs", eq, terms.size(), k);
    int ne = 0;
    for (size_t i = 0; i < k; ++i)
      if (terms[i].find("...") != std::string::npos) {
        int letters = 0;
        for (char c : terms[i]) letters += letter_label(c) >= 0;
        ne = std::max(ne, int(in[i].rank()) - letters);
      }
    std::vector<std::vector<int>> labels(k);
    for (size_t i = 0; i < k; ++i) labels[i] = term_labels(terms[i], int64_t(in[i].rank()), ne, false);
    std::vector<int64_t> size(size_t(kEllipsisBase + ne), -1);
    std::vector<int> uses(size.size(), 0);
    for (size_t i = 0; i < k; ++i)
      for (size_t d = 0; d < labels[i].size(); ++d) {
        const int l = labels[i][d];
        const int64_t v = in[i].dim(d);
        ++uses[size_t(l)];
        if (size[size_t(l)] < 0 || size[size_t(l)] == 1) size[size_t(l)] = v;
        else if (v != 1 && v != size[size_t(l)])  // size 1 broadcasts (numpy)
          sdk::fail(NXRT_INVALID_ARGUMENT, "Einsum: label sizes {} and {} differ", size[size_t(l)], v);
      }
    std::vector<int> out_labels;
    if (arrow != std::string::npos) {
      out_labels = term_labels(eq.substr(arrow + 2), 0, ne, true);
    } else {
      for (int e = 0; e < ne; ++e) out_labels.push_back(kEllipsisBase + e);
      for (int l = 0; l < kEllipsisBase; ++l)
        if (uses[size_t(l)] == 1) out_labels.push_back(l);
    }
    for (int l : out_labels)
      if (size[size_t(l)] < 0) sdk::fail(NXRT_INVALID_ARGUMENT, "Einsum: output label not in any input");
    std::vector<int> sum_labels;
    for (int l = 0; l < int(size.size()); ++l)
      if (size[size_t(l)] >= 0 && std::find(out_labels.begin(), out_labels.end(), l) == out_labels.end()) sum_labels.push_back(l);
    // Strides per label for each input (repeated labels add: diagonals; broadcast dims 0).
    std::vector<std::vector<int64_t>> lst(k, std::vector<int64_t>(size.size(), 0));
    for (size_t i = 0; i < k; ++i) {
      const auto st = contiguous_strides(in[i].dims());
      for (size_t d = 0; d < labels[i].size(); ++d)
        if (in[i].dim(d) != 1 || size[size_t(labels[i][d])] == 1) lst[i][size_t(labels[i][d])] += st[d];
    }
    std::vector<int64_t> od;
    for (int l : out_labels) od.push_back(size[size_t(l)]);
    TensorView y = ctx.output(0, in[0].dtype(), od);
    const int64_t on = y.numel();
    if (on == 0) return;
    int64_t sn = 1;
    for (int l : sum_labels) sn *= size[size_t(l)];
    auto run = [&](auto tag) {
      using T = decltype(tag);
      std::vector<const T*> ptr(k);
      for (size_t i = 0; i < k; ++i) ptr[i] = in[i].data<T>();
      T* yp = y.data<T>();
      const int parts = int(std::min<int64_t>(on, threads_for(pool, double(on) * double(sn) * double(k))));
      parallel_ranges(pool, on, parts, [&](int64_t b, int64_t e) {
        std::vector<int64_t> base(k);
        for (int64_t o = b; o < e; ++o) {
          std::fill(base.begin(), base.end(), 0);
          int64_t rem = o;
          for (size_t j = out_labels.size(); j-- > 0;) {
            const int l = out_labels[j];
            const int64_t v = rem % size[size_t(l)];
            rem /= size[size_t(l)];
            for (size_t i = 0; i < k; ++i) base[i] += v * lst[i][size_t(l)];
          }
          double acc = 0;
          for (int64_t q = 0; q < sn; ++q) {
            int64_t r2 = q;
            double prod = 1;
            for (size_t i = 0; i < k; ++i) {
              int64_t off = base[i], rr = r2;
              for (size_t j = sum_labels.size(); j-- > 0;) {
                const int l = sum_labels[j];
                off += (rr % size[size_t(l)]) * lst[i][size_t(l)];
                rr /= size[size_t(l)];
              }
              prod *= double(ptr[i][off]);
            }
            acc += prod;
          }
          yp[o] = T(acc);
        }
      });
    };
    if (in[0].dtype() == NXRT_DTYPE_FLOAT32) run(float{});
    else run(double{});
  });
}

Check einsum_check(const Node& n) {
  if (auto r = sdk::require_dtypes(n, kFloat)) return r;
  if (auto r = same_dtype(n)) return r;
  if (!n.has_attr("equation")) return sdk::refuse(NXRT_REFUSE_ATTRIBUTE, "Einsum: equation is required");
  return known_attrs(n, {"equation"});
}

// --------------------------------------------------------------------- Det

std::unique_ptr<Kernel> det_create(const Node&, CpuSession&) {
  return make_kernel([](Context& ctx) {
    ConstTensorView x = ctx.input(0);
    const size_t r = x.rank();
    if (r < 2 || x.dim(r - 1) != x.dim(r - 2)) sdk::fail(NXRT_INVALID_ARGUMENT, "Det: input {} is not [..., M, M]", dims_str(x.dims()));
    const int64_t m = x.dim(r - 1);
    std::vector<int64_t> od(x.dims().begin(), x.dims().end() - 2);
    TensorView y = ctx.output(0, x.dtype(), od);
    const int64_t mats = y.numel();
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* xp = x.data<T>();
      T* yp = y.data<T>();
      std::vector<double> a(static_cast<size_t>(m * m));
      for (int64_t b = 0; b < mats; ++b) {
        for (int64_t i = 0; i < m * m; ++i) a[size_t(i)] = double(xp[b * m * m + i]);
        double det = 1;
        for (int64_t c = 0; c < m; ++c) {
          int64_t piv = c;
          for (int64_t i = c + 1; i < m; ++i)
            if (std::fabs(a[size_t(i * m + c)]) > std::fabs(a[size_t(piv * m + c)])) piv = i;
          if (a[size_t(piv * m + c)] == 0) {
            det = 0;
            break;
          }
          if (piv != c) {
            for (int64_t j = 0; j < m; ++j) std::swap(a[size_t(piv * m + j)], a[size_t(c * m + j)]);
            det = -det;
          }
          const double d = a[size_t(c * m + c)];
          det *= d;
          for (int64_t i = c + 1; i < m; ++i) {
            const double f = a[size_t(i * m + c)] / d;
            for (int64_t j = c; j < m; ++j) a[size_t(i * m + j)] -= f * a[size_t(c * m + j)];
          }
        }
        yp[b] = T(det);
      }
    };
    if (x.dtype() == NXRT_DTYPE_FLOAT32) run(float{});
    else run(double{});
  });
}

}  // namespace

void register_linalg_ops(Registry& r) {
  r.add(Def{"Einsum", "", 12, INT_MAX, einsum_check, einsum_create});
  r.add(Def{"Det", "", 11, INT_MAX,
            [](const Node& n) -> Check {
              if (auto c = sdk::require_dtypes(n, kFloat)) return c;
              return known_attrs(n, {});
            },
            det_create});
}

}  // namespace nxrt::cpu
