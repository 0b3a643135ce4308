// The HTML report (golden/verify/html_report.hpp has the page's contents and caps).
#include "golden/verify/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <numeric>
#include <sstream>

namespace posenc::golden {
namespace {

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

/// Escaped text with `code` spans as <code>.
std::string esc_code(const std::string& s) {
  std::string o;
  bool open = false;
  for (const char c : esc(s)) {
    if (c == '`') {
      o += open ? "</code>" : "<code>";
      open = !open;
    } else {
      o += c;
    }
  }
  if (open) o += "</code>";
  return o;
}

std::string num(double x, const char* f = "%.3g") {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  char buf[48];
  std::snprintf(buf, sizeof buf, std::abs(x) >= 1e4 && std::string(f) == "%.3g" ? "%.3g" : f, x);
  return buf;
}

std::string ratio_text(double r) {
  if (std::isinf(r)) return "inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, r < 1e4 ? "%.3g" : "%.2e", r);
  return buf;
}

std::string pos_short(std::int64_t p) {
  if (p >= 10'000'000 && p % 1'000'000 == 0) return std::to_string(p / 1'000'000) + "M";
  if (p >= 10'000 && p % 1000 == 0) return std::to_string(p / 1000) + "k";
  return std::to_string(p);
}

/// A colour on the log scale [lo, hi] (decades): blue shades up to the budget (1), orange to
/// dark red above it; black for inf (NaN output), light grey for not judged.
std::string colour(double r, double lo, double hi) {
  if (std::isnan(r)) return "#e4e4e4";
  if (std::isinf(r)) return "#000000";
  const double l = std::log10(std::max(r, std::pow(10.0, lo)));
  auto mix = [](const int a[3], const int b[3], double t) {
    t = std::clamp(t, 0.0, 1.0);
    char buf[8];
    std::snprintf(buf, sizeof buf, "#%02x%02x%02x", static_cast<int>(a[0] + (b[0] - a[0]) * t),
                  static_cast<int>(a[1] + (b[1] - a[1]) * t),
                  static_cast<int>(a[2] + (b[2] - a[2]) * t));
    return std::string(buf);
  };
  static const int kLow[3] = {0xf1, 0xf6, 0xfb}, kBudget[3] = {0x21, 0x66, 0xac};
  static const int kOver[3] = {0xfd, 0xae, 0x61}, kWorst[3] = {0x67, 0x00, 0x0d};
  auto step = [](double t) { return std::round(std::clamp(t, 0.0, 1.0) * 24) / 24; };
  if (r <= 1) return mix(kLow, kBudget, step(lo < 0 ? (l - lo) / (0 - lo) : 1));
  return mix(kOver, kWorst, step(hi > 0 ? l / hi : 1));
}

/// The decades a tensor's plots span: [lo, hi], lo <= -1 < 0 < 1 <= hi.
std::pair<double, double> decades(const HtmlReport::TensorView& t) {
  double mn = std::numeric_limits<double>::infinity(), mx = 0;
  auto see = [&](double r) {
    if (std::isnan(r) || std::isinf(r)) return;
    if (r > 0) mn = std::min(mn, r);
    mx = std::max(mx, r);
  };
  for (const auto& p : t.by_position) see(p.worst_ratio);
  for (double r : t.grid) see(r);
  double lo = std::isfinite(mn) ? std::floor(std::log10(mn)) : -3;
  lo = std::clamp(lo, -8.0, -1.0);
  double hi = mx > 0 ? std::ceil(std::log10(mx)) : 1;
  hi = std::clamp(hi, 1.0, 12.0);
  return {lo, hi};
}

std::string decade_label(double d) {
  if (d == 0) return "1";
  return "1e" + std::to_string(static_cast<int>(d));
}

/// Worst error / budget at each position: log x (position + 1), log y, the budget line at 1.
std::string line_plot(const HtmlReport::TensorView& t) {
  const double W = 720, H = 250, L = 64, R = 24, T = 14, B = 46;
  const auto [lo, hi] = decades(t);
  std::int64_t pmax = 1;
  for (const auto& p : t.by_position) pmax = std::max(pmax, p.position);
  const double xmax = std::max(1.0, std::log10(static_cast<double>(pmax) + 1));
  auto X = [&](std::int64_t p) {
    return L + (W - L - R) * std::log10(static_cast<double>(std::max<std::int64_t>(p, 0)) + 1) / xmax;
  };
  auto Y = [&](double r) {
    double l = std::isinf(r) ? hi : std::log10(std::max(r, std::pow(10.0, lo)));
    l = std::clamp(l, lo, hi);
    return T + (H - T - B) * (hi - l) / (hi - lo);
  };
  std::ostringstream o;
  o << "<svg class=\"plot\" role=\"img\" width=\"" << W << "\" height=\"" << H
    << "\" viewBox=\"0 0 " << W << ' ' << H << "\" xmlns=\"http://www.w3.org/2000/svg\">"
    << "<title>" << esc(t.name) << ": worst error / budget at each position</title>";
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\""
    << H - T - B << "\" fill=\"#fcfcfc\" stroke=\"#bbb\"/>";
  const int step = hi - lo > 10 ? 2 : 1;
  for (double d = lo; d <= hi; d += step) {
    const double y = Y(std::pow(10.0, d));
    o << "<line x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << y << "\" y2=\"" << y
      << "\" stroke=\"#e3e3e3\"/><text class=\"tick\" x=\"" << L - 6 << "\" y=\"" << y + 4
      << "\" text-anchor=\"end\">" << decade_label(d) << "</text>";
  }
  for (std::int64_t p = 1, k = 0; k <= 9 && static_cast<double>(p) <= static_cast<double>(pmax) * 1.0001;
       p *= 10, ++k) {
    const std::int64_t at = k == 0 ? 0 : p;
    const double x = X(at);
    o << "<line x1=\"" << x << "\" x2=\"" << x << "\" y1=\"" << T << "\" y2=\"" << H - B
      << "\" stroke=\"#eee\"/><text class=\"tick\" x=\"" << x << "\" y=\"" << H - B + 15
      << "\" text-anchor=\"middle\">" << pos_short(at) << "</text>";
  }
  const double y1 = Y(1);
  o << "<line class=\"bound\" x1=\"" << L << "\" x2=\"" << W - R << "\" y1=\"" << y1 << "\" y2=\""
    << y1 << "\" stroke=\"#c0392b\" stroke-dasharray=\"6 4\" stroke-width=\"1.5\"/>"
    << "<text class=\"tick\" x=\"" << W - R - 4 << "\" y=\"" << y1 - 5
    << "\" text-anchor=\"end\" fill=\"#c0392b\">budget (ratio 1)</text>";
  o << "<polyline fill=\"none\" stroke=\"#555\" stroke-width=\"1\" points=\"";
  for (const auto& p : t.by_position) o << X(p.position) << ',' << Y(p.worst_ratio) << ' ';
  o << "\"/>";
  for (const auto& p : t.by_position) {
    const bool over = p.worst_ratio > 1;
    o << "<circle cx=\"" << X(p.position) << "\" cy=\"" << Y(p.worst_ratio) << "\" r=\"3\" fill=\""
      << (over ? "#c0392b" : "#2166ac") << "\"><title>position " << p.position << ": worst "
      << ratio_text(p.worst_ratio) << " of budget, " << p.n_over << "/" << p.n << " over"
      << "</title></circle>";
    if (p.saturated > 0) {
      o << "<rect x=\"" << X(p.position) - 3 << "\" y=\"" << H - B - 7
        << "\" width=\"6\" height=\"6\" fill=\"#999\"><title>position " << p.position
        << ": the budget admits any angle for " << num(100 * p.saturated, "%.0f")
        << "% of the elements (unchecked there)</title></rect>";
    }
  }
  o << "<text class=\"axis\" x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 8
    << "\" text-anchor=\"middle\">position (log scale; grey squares: partly unchecked)</text>"
    << "<text class=\"axis\" transform=\"translate(14," << (T + H - B) / 2
    << ") rotate(-90)\" text-anchor=\"middle\">worst |error| / budget</text></svg>";
  return o.str();
}

/// Position x channel heat map of the ratio with its legend.
std::string heat_map(const HtmlReport::TensorView& t) {
  const int nc = static_cast<int>(t.col_labels.size()), nr = static_cast<int>(t.row_labels.size());
  if (nc == 0 || nr == 0) return "";
  const auto [lo, hi] = decades(t);
  // Whole-pixel cells; a row's run of cells of one colour is one rect (the page stays small).
  const int cw = std::clamp(640 / nc, 2, 28), ch = std::clamp(300 / nr, 2, 14);
  const int L = 64, T = 8, B = 58, gw = cw * nc, gh = ch * nr;
  const int W = L + gw + 110, H = T + gh + B;
  std::ostringstream o;
  o << "<svg class=\"heat\" role=\"img\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 "
    << W << ' ' << H << "\" xmlns=\"http://www.w3.org/2000/svg\"><title>" << esc(t.name)
    << ": error / budget by position and " << esc(t.row_axis) << " (worst "
    << ratio_text(t.ratio) << ")</title>";
  for (int r = 0; r < nr; ++r) {
    for (int c = 0; c < nc;) {
      const std::string fill = colour(t.grid[static_cast<std::size_t>(r * nc + c)], lo, hi);
      int e = c + 1;
      while (e < nc && colour(t.grid[static_cast<std::size_t>(r * nc + e)], lo, hi) == fill) ++e;
      o << "<rect x=\"" << L + c * cw << "\" y=\"" << T + r * ch << "\" width=\"" << (e - c) * cw
        << "\" height=\"" << ch << "\" fill=\"" << fill << "\"/>";
      c = e;
    }
  }
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << gw << "\" height=\"" << gh
    << "\" fill=\"none\" stroke=\"#999\"/>";
  const int xe = std::max(1, (nc + 9) / 10), ye = std::max(1, (nr + 7) / 8);
  for (int c = 0; c < nc; c += xe) {
    const double x = L + (c + 0.5) * cw;
    o << "<text class=\"tick\" transform=\"translate(" << x << ',' << T + gh + 10
      << ") rotate(35)\">" << t.col_labels[c] << "</text>";
  }
  for (int r = 0; r < nr; r += ye) {
    o << "<text class=\"tick\" x=\"" << L - 5 << "\" y=\"" << T + (r + 0.5) * ch + 4
      << "\" text-anchor=\"end\">" << t.row_labels[r] << "</text>";
  }
  o << "<text class=\"axis\" x=\"" << L + gw / 2 << "\" y=\"" << H - 4
    << "\" text-anchor=\"middle\">position" << (t.merged_cols ? " (bins, max)" : "")
    << "</text><text class=\"axis\" transform=\"translate(12," << T + gh / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << esc(t.row_axis)
    << (t.merged_rows ? " (bins)" : "") << "</text>";
  // Legend: a column of swatches from hi (top) to lo, ticked at each decade.
  const double lx = L + gw + 22, lh = std::max(120.0, std::min<double>(gh, 260.0));
  const int steps = 48;
  for (int i = 0; i < steps; ++i) {
    const double d = hi - (hi - lo) * (i + 0.5) / steps;
    o << "<rect class=\"legend\" x=\"" << lx << "\" y=\"" << T + lh * i / steps << "\" width=\"14\" height=\""
      << lh / steps + 0.5 << "\" fill=\"" << colour(std::pow(10.0, d), lo, hi) << "\"/>";
  }
  for (double d = hi; d >= lo; d -= (hi - lo > 8 ? 2 : 1)) {
    const double y = T + lh * (hi - d) / (hi - lo);
    o << "<text class=\"tick\" x=\"" << lx + 18 << "\" y=\"" << y + 4 << "\">" << decade_label(d)
      << (d == 0 ? " budget" : "") << "</text>";
  }
  o << "</svg>";
  return o.str();
}

const char* kCss = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#222;margin:24px auto;max-width:1180px;padding:0 16px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 6px;border-top:1px solid #ddd;padding-top:14px}
h3{font-size:15px;margin:18px 0 4px}code,.mono{font:12.5px/1.4 ui-monospace,"DejaVu Sans Mono",monospace}
table{border-collapse:collapse;margin:6px 0 10px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.PASS{color:#1a7f37;font-weight:600}.FAIL{color:#c0392b;font-weight:600}.ERROR{color:#8e44ad;font-weight:600}
.NA,.MISSING,.NOOUTPUT{color:#777}.INCONCLUSIVE{color:#b7791f;font-weight:600}.meta{color:#555}.note{color:#555;font-size:13px}
.diag{background:#fff8e6;border:1px solid #f0d9a0;border-radius:6px;padding:8px 12px;margin:8px 0}
.diag.correct{background:#eefaf0;border-color:#b7e2c0}.verdict{font-weight:600}
.stats{color:#333}.tick{font-size:11px;fill:#444}.axis{font-size:12px;fill:#222}
svg{display:block;margin:6px 0}.pair{display:flex;flex-wrap:wrap;gap:12px;align-items:flex-start}
)";

std::string status_class(Verdict v) {
  const std::string s = to_string(v);
  std::string c;
  for (char ch : s) {
    if (std::isalpha(static_cast<unsigned char>(ch))) c += ch;
  }
  return c;
}

}  // namespace

HtmlReport::HtmlReport(std::string title, std::string command, std::string profile)
    : title_(std::move(title)), command_(std::move(command)), profile_(std::move(profile)) {}

void HtmlReport::add_case(const CaseSpec& spec, const TensorMap& golden, const TensorMap* actual,
                          const CaseReport& report, const ElementRatios* ratios,
                          std::optional<nlohmann::json> diagnosis, std::string diagnose_command) {
  static const std::vector<double> kNone;
  CaseView c;
  c.id = report.id.empty() ? spec.id : report.id;
  c.scheme = report.scheme.empty() ? spec.scheme : report.scheme;
  c.result = spec.result;
  c.profile = report.profile;
  c.status = report.status;
  c.message = report.message;
  c.reproduces_under = report.reproduces_under;
  c.notes = report.notes;
  c.diagnosis = std::move(diagnosis);
  c.diagnose_command = std::move(diagnose_command);
  for (const auto& tr : report.tensors) {
    TensorView v;
    v.name = tr.name;
    v.stage = tr.stage;
    v.status = tr.status;
    v.message = tr.message;
    v.ratio = tr.max_ratio;
    v.n = tr.n;
    v.n_over = tr.n_over;
    v.first_fail = tr.first_fail_position;
    v.passes_up_to = tr.passes_up_to_position;
    v.worst_query = tr.worst.query_position;
    v.worst_key = tr.worst.key_position;
    v.by_position = tr.by_position;
    const auto ts = std::find_if(spec.expected.begin(), spec.expected.end(),
                                 [&](const TensorSpec& x) { return x.name == tr.name; });
    const std::vector<double>* found = nullptr;
    if (ratios) {
      const auto it = ratios->find(tr.name);
      if (it != ratios->end()) found = &it->second;
    }
    const std::vector<double>& tr_ratios = found ? *found : kNone;
    std::int64_t n = 1;
    if (ts != spec.expected.end()) {
      for (auto d : ts->shape) n *= d;
    }
    if (ts == spec.expected.end() || tr_ratios.empty() ||
        static_cast<std::int64_t>(tr_ratios.size()) != n) {
      c.tensors.push_back(std::move(v));
      continue;
    }
    const auto& shape = ts->shape;
    // The worst elements.
    std::vector<std::int64_t> idx;
    for (std::int64_t j = 0; j < n; ++j) {
      if (!std::isnan(tr_ratios[j])) idx.push_back(j);
    }
    const std::size_t k = std::min<std::size_t>(idx.size(), kHtmlWorstElements);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(),
                      [&](std::int64_t a, std::int64_t b) {
                        return tr_ratios[a] != tr_ratios[b] ? tr_ratios[a] > tr_ratios[b] : a < b;
                      });
    const Tensor* act = nullptr;
    if (actual) {
      const auto it = actual->find(tr.name);
      if (it != actual->end() && it->second.numel() == n && dtype_is_float(it->second.dtype)) {
        act = &it->second;
      }
    }
    const Tensor* ex = nullptr;
    const auto ge = golden.find(ts->exact.empty() ? ts->name : ts->exact);
    if (ge != golden.end() && ge->second.numel() == n && dtype_is_float(ge->second.dtype)) {
      ex = &ge->second;
    }
    for (std::size_t i = 0; i < k; ++i) {
      Worst w;
      w.where = describe_element(*ts, golden, idx[i]);
      w.actual = act ? act->get_f64(idx[i]) : std::nan("");
      w.exact = ex ? ex->get_f64(idx[i]) : std::nan("");
      w.ratio = tr_ratios[idx[i]];
      v.worst.push_back(w);
    }
    // The heat map: the first axis with positions as columns, the last other axis as rows.
    int kp = -1, kr = -1;
    std::vector<std::int64_t> axis_pos;
    for (std::size_t a = 0; a < ts->axes.size() && a < shape.size(); ++a) {
      if (ts->axes[a].positions.empty()) continue;
      const auto it = golden.find(ts->axes[a].positions);
      if (it == golden.end() || it->second.numel() != shape[a]) continue;
      kp = static_cast<int>(a);
      for (std::int64_t i = 0; i < shape[a]; ++i) axis_pos.push_back(it->second.get_i64(i));
      break;
    }
    if (kp < 0) {
      c.tensors.push_back(std::move(v));
      continue;
    }
    for (int a = static_cast<int>(shape.size()) - 1; a >= 0; --a) {
      if (a != kp) {
        kr = a;
        break;
      }
    }
    const std::int64_t ncol_raw = shape[kp], nrow_raw = kr >= 0 ? shape[kr] : 1;
    const std::int64_t cb = (ncol_raw + kHtmlMaxColumns - 1) / kHtmlMaxColumns;
    const std::int64_t rb = (nrow_raw + kHtmlMaxRows - 1) / kHtmlMaxRows;
    const std::int64_t nc = (ncol_raw + cb - 1) / cb, nr = (nrow_raw + rb - 1) / rb;
    v.merged_cols = cb > 1;
    v.merged_rows = rb > 1;
    v.row_axis = kr >= 0 && kr < static_cast<int>(ts->axes.size()) && !ts->axes[kr].name.empty()
                     ? ts->axes[kr].name
                     : (kr >= 0 ? "dim " + std::to_string(kr) : "(one row)");
    for (std::int64_t ci = 0; ci < nc; ++ci) {
      const std::int64_t a = axis_pos[ci * cb], b = axis_pos[std::min(ncol_raw, (ci + 1) * cb) - 1];
      v.col_labels.push_back(a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b));
      v.col_positions.push_back(a);
    }
    for (std::int64_t ri = 0; ri < nr; ++ri) {
      const std::int64_t a = ri * rb, b = std::min(nrow_raw, (ri + 1) * rb) - 1;
      v.row_labels.push_back(a == b ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(b));
    }
    v.grid.assign(static_cast<std::size_t>(nr * nc), std::nan(""));
    std::vector<std::int64_t> co(shape.size(), 0);
    for (std::int64_t j = 0; j < n; ++j) {
      const double q = tr_ratios[j];
      if (!std::isnan(q)) {
        const std::int64_t col = co[kp] / cb, row = kr >= 0 ? co[kr] / rb : 0;
        double& cell = v.grid[static_cast<std::size_t>(row * nc + col)];
        if (std::isnan(cell) || q > cell) cell = q;
      }
      for (std::size_t a = co.size(); a-- > 0;) {  // odometer
        if (++co[a] < shape[a]) break;
        co[a] = 0;
      }
    }
    c.tensors.push_back(std::move(v));
  }
  cases_.push_back(std::move(c));
}

std::string HtmlReport::summary_text() const {
  int pass = 0, fail = 0, inconclusive = 0, other = 0;
  for (const auto& c : cases_) {
    pass += c.status == Verdict::kPass;
    fail += c.status == Verdict::kFail;
    inconclusive += c.status == Verdict::kInconclusive;
    other += !judged(c.status) && c.status != Verdict::kInconclusive;
  }
  std::ostringstream o;
  o << cases_.size() << " case(s): " << pass << " passed, " << fail << " failed";
  if (inconclusive) {
    o << ", " << inconclusive
      << " inconclusive (negative controls whose given stages cannot tell the right convention "
         "from the known-wrong one)";
  }
  if (other) o << ", " << other << " other (error, not applicable, no output)";
  return o.str();
}

std::string HtmlReport::html() const {
  std::ostringstream o;
  o << kHtmlReportMark  // how --report recognises its own page (golden/format/output_path.hpp)
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
    << "<title>" << esc(title_) << " report</title><style>" << kCss << "</style></head><body>\n";
  o << "<h1>" << esc(title_) << " report</h1>\n<p class=\"meta\"><code>" << esc(command_)
    << "</code><br>profile <b>" << esc(profile_) << "</b>: <span class=\"summary\">"
    << summary_text();
  o << "</span></p>\n<p class=\"note\">ratio = |actual &minus; exact| / budget of the element "
       "under the profile; an element fails above 1. Plots: the worst ratio at each position "
       "(log axes) and a position &times; channel heat map (log colour scale). Caps: at most "
    << kHtmlMaxColumns << " position columns and " << kHtmlMaxRows
    << " channel rows per heat map (consecutive ones merged by their maximum), "
    << kHtmlWorstElements << " worst elements per tensor, " << kHtmlMaxPlotted
    << " tensors plotted per page.</p>\n";

  // The case table.
  o << "<table class=\"cases\"><thead><tr><th>case</th><th>scheme</th><th>profile</th>"
       "<th>status</th><th>worst ratio per tensor</th></tr></thead><tbody>\n";
  for (const auto& c : cases_) {
    o << "<tr class=\"case-row\"><td class=\"mono\"><a href=\"#" << esc(c.id) << "\">" << esc(c.id)
      << "</a>" << (c.result == "invalid" ? " (negative control)" : "") << "</td><td>"
      << esc(c.scheme) << "</td><td>" << esc(c.profile) << "</td><td class=\""
      << status_class(c.status) << "\">" << esc(to_string(c.status));
    if (!c.reproduces_under.empty()) {  // a negative control that differs only under this profile
      std::string names;
      for (const auto& n : c.reproduces_under) names += (names.empty() ? "" : ", ") + n;
      o << " (differs under " << esc(c.profile) << "; reproduces it under " << esc(names) << ")";
    }
    o << "</td><td class=\"mono\">";
    bool first = true;
    for (const auto& t : c.tensors) {
      o << (first ? "" : " &middot; ") << esc(t.name) << " <span class=\"" << status_class(t.status)
        << "\">" << (judged(t.status) ? ratio_text(t.ratio) : esc(to_string(t.status)))
        << "</span>";
      first = false;
    }
    if (c.tensors.empty() && !c.message.empty()) o << esc(c.message);
    o << "</td></tr>\n";
  }
  o << "</tbody></table>\n";

  // Sections: every failing case; every checked case when the run has few.
  const bool all = cases_.size() <= 12;
  int plotted = 0, not_plotted = 0;
  for (const auto& c : cases_) {
    const bool show = c.status == Verdict::kFail || c.status == Verdict::kInconclusive ||
                      (all && c.status == Verdict::kPass) || c.diagnosis;
    if (!show) continue;
    o << "<section class=\"case\" id=\"" << esc(c.id) << "\"><h2><span class=\"mono\">" << esc(c.id)
      << "</span> <span class=\"" << status_class(c.status) << "\">" << esc(to_string(c.status))
      << "</span></h2>\n<p class=\"meta\">scheme " << esc(c.scheme) << ", profile "
      << esc(c.profile) << (c.result == "invalid" ? ", a negative control (it passes by "
                                                    "differing from its wrong values)" : "")
      << "</p>\n";
    if (!c.message.empty()) o << "<p>" << esc(c.message) << "</p>\n";
    for (const auto& n : c.notes) o << "<p class=\"note\">note: " << esc(n) << "</p>\n";
    if (c.diagnosis) {
      const auto& d = *c.diagnosis;
      const std::string verdict = d.value("verdict", "");
      o << "<div class=\"diag " << esc(verdict) << "\"><div><span class=\"verdict\">diagnosis: "
        << esc(verdict) << "</span> &mdash; <span class=\"summary\">" << esc_code(d.value("summary", ""))
        << "</span></div>";
      const auto& hs = d.contains("hypotheses") ? d.at("hypotheses") : nlohmann::json::array();
      if (verdict != "correct" && !hs.empty()) {
        o << "<table class=\"hyp\"><thead><tr><th>#</th><th>residual</th><th>pipeline</th>"
             "<th>budget</th><th>mistake</th><th>confirmed</th><th>evidence</th></tr></thead><tbody>";
        for (std::size_t i = 0; i < hs.size() && i < 5; ++i) {
          const auto& h = hs[i];
          const auto& res = h.at("residual");
          o << "<tr><td>" << i + 1 << "</td><td class=\"num\">"
            << ratio_text(res.is_number() ? res.get<double>() : INFINITY)  // null: infinite
            << "</td><td>" << esc(h.value("pipeline", "")) << "</td><td>"
            << esc(h.value("profile", "")) << "</td><td class=\"mono\">"
            << esc(h.value("mistake", "").empty() ? "(none)" : h.value("mistake", "")) << "</td><td>"
            << (h.value("confirmed", false) ? "yes" : "no") << "</td><td>"
            << esc_code(h.contains("fit") ? h["fit"].value("words", "") : h.value("words", ""))
            << "</td></tr>";
        }
        o << "</tbody></table>";
      }
      o << "</div>\n";
    } else if (c.status == Verdict::kFail && c.result != "invalid" && !c.diagnose_command.empty()) {
      o << "<div class=\"diag\">what went wrong: run <code>" << esc(c.diagnose_command)
        << "</code></div>\n";
    }
    for (const auto& t : c.tensors) {
      if (!judged(t.status)) {
        o << "<h3 class=\"mono\">" << esc(t.name) << " <span class=\"" << status_class(t.status)
          << "\">" << esc(to_string(t.status)) << "</span></h3>";
        if (!t.message.empty()) o << "<p class=\"note\">" << esc(t.message) << "</p>";
        o << "\n";
        continue;
      }
      o << "<div class=\"tensor\"><h3><span class=\"mono\">" << esc(t.name) << "</span> ("
        << esc(t.stage) << ") <span class=\"" << to_string(t.status) << "\">" << to_string(t.status)
        << "</span></h3>\n<p class=\"stats\">worst " << ratio_text(t.ratio) << " of budget, "
        << t.n_over << "/" << t.n << " elements over";
      if (t.first_fail) o << ", first failing position " << *t.first_fail;
      if (t.passes_up_to) o << ", every element passes up to position " << *t.passes_up_to;
      if (t.worst_query && t.worst_key) {
        o << "; worst element at query position " << *t.worst_query << ", key position "
          << *t.worst_key << " (key - query = " << *t.worst_key - *t.worst_query << ")";
      }
      o << "</p>\n";
      if (!t.message.empty()) o << "<p class=\"note\">" << esc(t.message) << "</p>\n";
      const bool plot = !t.by_position.empty() || !t.grid.empty();
      if (plot && plotted >= kHtmlMaxPlotted) {
        ++not_plotted;
      } else if (plot) {
        ++plotted;
        o << "<div class=\"pair\">";
        if (!t.by_position.empty()) o << line_plot(t);
        o << heat_map(t) << "</div>\n";
      }
      if (!t.worst.empty()) {
        o << "<table class=\"worst\"><thead><tr><th>worst elements</th><th>actual</th>"
             "<th>exact</th><th>ratio</th></tr></thead><tbody>";
        for (const auto& w : t.worst) {
          o << "<tr><td>" << esc(w.where) << "</td><td class=\"num mono\">" << num(w.actual, "%.9g")
            << "</td><td class=\"num mono\">" << num(w.exact, "%.9g") << "</td><td class=\"num "
            << status_class(w.ratio > 1 ? Verdict::kFail : Verdict::kPass) << "\">" << ratio_text(w.ratio) << "</td></tr>";
        }
        o << "</tbody></table>\n";
      }
      o << "</div>\n";
    }
    o << "</section>\n";
  }
  if (not_plotted > 0) {
    o << "<p class=\"note\">" << not_plotted << " more tensor(s) not plotted (cap of "
      << kHtmlMaxPlotted << " per page); narrow the run with --case.</p>\n";
  }
  if (!all) {
    o << "<p class=\"note\">Passing cases are listed in the table only (the run has more than 12 "
         "cases).</p>\n";
  }
  o << "</body></html>\n";
  return o.str();
}

void HtmlReport::write(const std::filesystem::path& path, const OutputRule& rule) const {
  rule.write_text(path, OutputKind::kReport, html());
}

}  // namespace posenc::golden
