#include "analysis/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>


namespace sy::svg {
namespace {

constexpr const char* kFont = "font-family=\"DejaVu Sans, Arial, Helvetica, sans-serif\"";

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string num(double v, int decimals = 1) {
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

// Tick values covering [lo, hi] at a 1/2/5 x 10^k step, about `target` of them.
// With `integer`, steps are whole numbers (step counts on an axis).
std::vector<double> ticks(double lo, double hi, int target = 6, bool integer = false) {
  if (!(hi > lo)) return {lo};
  const double raw = (hi - lo) / target, mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    step = m * mag;
    if (integer && (step < 1.0 || step != std::floor(step))) continue;
    if (step >= raw) break;
  }
  if (integer) step = std::max(step, 1.0);
  std::vector<double> t;
  for (double v = std::ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step)
    t.push_back(std::abs(v) < 1e-12 ? 0.0 : v);
  return t;
}

int tick_decimals(const std::vector<double>& t, bool percent) {
  if (t.size() < 2) return 0;
  double step = (t[1] - t[0]) * (percent ? 100.0 : 1.0);
  int d = 0;
  while (d < 4 && std::abs(step * std::pow(10.0, d) - std::round(step * std::pow(10.0, d))) > 1e-6) ++d;
  return d;
}

std::string tick_label(double v, bool percent, int decimals) {
  return percent ? num(v * 100.0, decimals) + "%" : num(v, decimals);
}

// Viridis, sampled at 9 points and interpolated linearly.
std::string viridis(double t) {
  static const int c[9][3] = {{68, 1, 84},    {71, 44, 122}, {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                              {39, 173, 129}, {92, 200, 99}, {170, 220, 50}, {253, 231, 37}};
  t = std::clamp(t, 0.0, 1.0) * 8.0;
  const int i = std::min(7, static_cast<int>(t));
  const double f = t - i;
  char b[16];
  std::snprintf(b, sizeof b, "#%02x%02x%02x",
                static_cast<int>(std::lround(c[i][0] + f * (c[i + 1][0] - c[i][0]))),
                static_cast<int>(std::lround(c[i][1] + f * (c[i + 1][1] - c[i][1]))),
                static_cast<int>(std::lround(c[i][2] + f * (c[i + 1][2] - c[i][2]))));
  return b;
}

void open_svg(std::ostringstream& o, int w, int h, const std::string& title, const std::string& subtitle) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << w << "\" height=\"" << h << "\" viewBox=\"0 0 "
    << w << ' ' << h << "\" " << kFont << ">\n<title>" << esc(title) << "</title>\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << w / 2 << "\" y=\"24\" text-anchor=\"middle\" font-size=\"17\" font-weight=\"bold\">"
    << esc(title) << "</text>\n";
  if (!subtitle.empty()) {
    o << "<text x=\"" << w / 2 << "\" y=\"44\" text-anchor=\"middle\" font-size=\"12\" fill=\"#444\">"
      << esc(subtitle) << "</text>\n";
  }
}

void text(std::ostringstream& o, double x, double y, const std::string& s, const char* anchor = "middle",
          int size = 12, const std::string& extra = "") {
  o << "<text x=\"" << num(x) << "\" y=\"" << num(y) << "\" text-anchor=\"" << anchor << "\" font-size=\""
    << size << "\"" << (extra.empty() ? "" : " " + extra) << ">" << esc(s) << "</text>\n";
}

void y_axis_label(std::ostringstream& o, double x, double y, const std::string& s) {
  text(o, x, y, s, "middle", 13, "transform=\"rotate(-90 " + num(x) + " " + num(y) + ")\"");
}

}  // namespace

const std::string& colour(int i) {
  static const std::vector<std::string> p = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                             "#9467bd", "#8c564b", "#e377c2"};
  return p[static_cast<size_t>(i) % p.size()];
}

std::string line_plot(const LinePlot& p) {
  const int W = 760, H = 470, L = 80, R = 200, T = 64, B = 60;
  const double pw = W - L - R, ph = H - T - B;
  auto X = [&](double x) { return L + (x - p.x_min) / (p.x_max - p.x_min) * pw; };
  auto Y = [&](double y) { return T + ph - (y - p.y_min) / (p.y_max - p.y_min) * ph; };
  std::ostringstream o;
  open_svg(o, W, H, p.title, p.subtitle);
  const auto xt = ticks(p.x_min, p.x_max), yt = ticks(p.y_min, p.y_max);
  const int xd = tick_decimals(xt, p.x_percent), yd = tick_decimals(yt, p.y_percent);
  for (double v : yt) {
    o << "<line x1=\"" << L << "\" x2=\"" << L + pw << "\" y1=\"" << num(Y(v)) << "\" y2=\"" << num(Y(v))
      << "\" stroke=\"#ddd\"/>\n";
    text(o, L - 6, Y(v) + 4, tick_label(v, p.y_percent, yd), "end", 11);
  }
  for (double v : xt) {
    o << "<line x1=\"" << num(X(v)) << "\" x2=\"" << num(X(v)) << "\" y1=\"" << T << "\" y2=\"" << T + ph
      << "\" stroke=\"#eee\"/>\n";
    text(o, X(v), T + ph + 16, tick_label(v, p.x_percent, xd), "middle", 11);
  }
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  text(o, L + pw / 2, H - 18, p.x_label, "middle", 13);
  y_axis_label(o, 20, T + ph / 2, p.y_label);
  // Earlier series are drawn wider and with larger markers of their own shape, so a
  // series that coincides with a later one still shows around it.
  const size_t n = p.series.size();
  for (size_t i = 0; i < n; ++i) {
    const Series& s = p.series[i];
    const double width = s.dashed ? 2.0 : 2.0 + 1.2 * double(n - 1 - i);
    const double r = 3.0 + 1.0 * double(n - 1 - i);
    o << "<polyline fill=\"none\" stroke=\"" << s.colour << "\" stroke-width=\"" << num(width)
      << "\" stroke-linejoin=\"round\"" << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t k = 0; k < s.x.size(); ++k) o << num(X(s.x[k])) << ',' << num(Y(s.y[k])) << ' ';
    o << "\"/>\n";
    const double ly = T + 14 + 22.0 * i;
    auto marker = [&](double x, double y) {
      switch (i % 4) {
        case 0:
          o << "<circle cx=\"" << num(x) << "\" cy=\"" << num(y) << "\" r=\"" << num(r) << "\"";
          break;
        case 1:
          o << "<rect x=\"" << num(x - r) << "\" y=\"" << num(y - r) << "\" width=\"" << num(2 * r)
            << "\" height=\"" << num(2 * r) << "\"";
          break;
        case 2:
          o << "<polygon points=\"" << num(x) << ',' << num(y - 1.3 * r) << ' ' << num(x - 1.2 * r) << ','
            << num(y + r) << ' ' << num(x + 1.2 * r) << ',' << num(y + r) << "\"";
          break;
        default:
          o << "<polygon points=\"" << num(x) << ',' << num(y - 1.3 * r) << ' ' << num(x + 1.3 * r) << ','
            << num(y) << ' ' << num(x) << ',' << num(y + 1.3 * r) << ' ' << num(x - 1.3 * r) << ',' << num(y)
            << "\"";
          break;
      }
      o << " fill=\"" << s.colour << "\"/>\n";
    };
    if (s.markers) {
      for (size_t k = 0; k < s.x.size(); ++k) marker(X(s.x[k]), Y(s.y[k]));
    }
    o << "<line x1=\"" << L + pw + 14 << "\" x2=\"" << L + pw + 44 << "\" y1=\"" << num(ly) << "\" y2=\""
      << num(ly) << "\" stroke=\"" << s.colour << "\" stroke-width=\"" << num(std::min(width, 4.0)) << "\""
      << (s.dashed ? " stroke-dasharray=\"6 4\"" : "") << "/>\n";
    if (s.markers) marker(L + pw + 29, ly);
    text(o, L + pw + 50, ly + 4, s.name, "start", 12);
  }
  o << "</svg>\n";
  return o.str();
}

std::string heatmap(const Heatmap& h) {
  const int L = 80, R = 130, T = 64, B = 58, W = 960;
  const double cell_h = std::clamp(300.0 / std::max(1, h.rows), 6.0, 28.0);
  const double pw = W - L - R, ph = cell_h * h.rows;
  const int H = static_cast<int>(T + ph + B);
  std::ostringstream o;
  open_svg(o, W, H, h.title, h.subtitle);
  const double cw = pw / std::max(1, h.cols);
  o << "<g shape-rendering=\"crispEdges\">\n";
  for (int r = 0; r < h.rows; ++r) {
    const double y = T + ph - (r + 1) * cell_h;  // row 0 at the bottom
    for (int c = 0; c < h.cols; ++c) {
      const double v = h.value[size_t(r) * h.cols + c];
      const std::string fill = v <= 0 ? "#e8e8e8" : viridis(v / (h.vmax > 0 ? h.vmax : 1.0));
      o << "<rect x=\"" << num(L + c * cw, 2) << "\" y=\"" << num(y, 2) << "\" width=\"" << num(cw + 0.05, 2)
        << "\" height=\"" << num(cell_h, 2) << "\" fill=\"" << fill << "\"/>\n";
    }
  }
  o << "</g>\n<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << num(pw) << "\" height=\"" << num(ph)
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  const int label_every = std::max(1, static_cast<int>(std::ceil(12.0 / cell_h)));
  for (int r = 0; r < h.rows; r += label_every) {
    const std::string lab = r < static_cast<int>(h.row_labels.size()) ? h.row_labels[r] : std::to_string(r);
    text(o, L - 6, T + ph - (r + 0.5) * cell_h + 4, lab, "end", 11);
  }
  for (double v : ticks(h.x_min, h.x_max, 8, /*integer=*/true)) {
    const double x = L + (v - h.x_min) / (h.x_max - h.x_min) * pw;
    o << "<line x1=\"" << num(x) << "\" x2=\"" << num(x) << "\" y1=\"" << num(T + ph) << "\" y2=\""
      << num(T + ph + 5) << "\" stroke=\"#333\"/>\n";
    text(o, x, T + ph + 18, num(v, 0), "middle", 11);
  }
  text(o, L + pw / 2, H - 14, h.x_label, "middle", 13);
  y_axis_label(o, 18, T + ph / 2, h.y_label);
  // Colour bar: vmax at the top, 0 at the bottom; grey marks "no tokens".
  const double bx = L + pw + 24, bh = std::max(ph - 28, 60.0);
  o << "<defs><linearGradient id=\"cbar\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">\n";
  for (int i = 0; i <= 8; ++i)
    o << "<stop offset=\"" << num(i / 8.0, 3) << "\" stop-color=\"" << viridis(i / 8.0) << "\"/>\n";
  o << "</linearGradient></defs>\n<rect x=\"" << num(bx) << "\" y=\"" << T << "\" width=\"16\" height=\""
    << num(bh) << "\" fill=\"url(#cbar)\" stroke=\"#333\"/>\n";
  for (double v : ticks(0, h.vmax, 4)) {
    const double y = T + bh - v / (h.vmax > 0 ? h.vmax : 1.0) * bh;
    text(o, bx + 20, y + 4, num(v, h.vmax < 0.1 ? 3 : 2), "start", 10);
  }
  o << "<rect x=\"" << num(bx) << "\" y=\"" << num(T + bh + 8)
    << "\" width=\"16\" height=\"12\" fill=\"#e8e8e8\" stroke=\"#333\"/>\n";
  text(o, bx + 20, T + bh + 18, "0 (idle)", "start", 10);
  y_axis_label(o, W - 14, T + ph / 2, h.legend_label);
  o << "</svg>\n";
  return o.str();
}

std::string bar_chart(const BarChart& b) {
  const int panel_w = 330, gap = 90, T = 116, ph = 300, B = 50;
  const int n = static_cast<int>(b.panels.size());
  const int W = std::max(780, 80 + n * panel_w + (n - 1) * gap + 30), H = T + ph + B;
  const int L = (W - n * panel_w - (n - 1) * gap) / 2 + 20;
  std::ostringstream o;
  open_svg(o, W, H, b.title, b.subtitle);
  // Legend on its own row under the title; text width estimated at 7.5 px per character.
  double legend_w = 0;
  for (const auto& s : b.series) legend_w += 44 + 7.5 * s.size();
  if (b.reference >= 0) legend_w += 40 + 7.5 * b.reference_label.size();
  double lx = (W - legend_w) / 2;
  for (size_t i = 0; i < b.series.size(); ++i) {
    o << "<rect x=\"" << num(lx) << "\" y=\"60\" width=\"14\" height=\"14\" fill=\"" << b.colours[i]
      << "\"/>\n";
    text(o, lx + 20, 72, b.series[i], "start", 12);
    lx += 44 + 7.5 * b.series[i].size();
  }
  if (b.reference >= 0) {
    o << "<line x1=\"" << num(lx) << "\" x2=\"" << num(lx + 28)
      << "\" y1=\"67\" y2=\"67\" stroke=\"#555\" stroke-dasharray=\"5 3\"/>\n";
    text(o, lx + 34, 72, b.reference_label, "start", 12);
  }
  for (int pi = 0; pi < n; ++pi) {
    const BarPanel& p = b.panels[pi];
    const double x0 = L + pi * (panel_w + gap);
    double vmax = b.reference;
    for (const auto& g : p.values)
      for (double v : g) vmax = std::max(vmax, v);
    auto yt = ticks(0, vmax * 1.1);
    if (yt.size() >= 2 && yt.back() < vmax * 1.08)
      yt.push_back(yt.back() + (yt[1] - yt[0]));  // room for the labels
    const double ymax = yt.back() > 0 ? yt.back() : 1.0;
    auto Y = [&](double v) { return T + ph - v / ymax * ph; };
    const int yd = tick_decimals(yt, false);
    for (double v : yt) {
      o << "<line x1=\"" << num(x0) << "\" x2=\"" << num(x0 + panel_w) << "\" y1=\"" << num(Y(v))
        << "\" y2=\"" << num(Y(v)) << "\" stroke=\"#e4e4e4\"/>\n";
      text(o, x0 - 5, Y(v) + 4, num(v, yd), "end", 10);
    }
    text(o, x0 + panel_w / 2.0, T - 10, p.title, "middle", 13, "font-weight=\"bold\"");
    y_axis_label(o, x0 - 42, T + ph / 2.0, p.y_label);
    const double gw = double(panel_w) / std::max<size_t>(1, p.groups.size());
    for (size_t g = 0; g < p.groups.size(); ++g) {
      const size_t ns = p.values[g].size();
      const double bw = gw * 0.8 / std::max<size_t>(1, ns);
      for (size_t s = 0; s < ns; ++s) {
        const double v = p.values[g][s], x = x0 + g * gw + gw * 0.1 + s * bw;
        o << "<rect x=\"" << num(x) << "\" y=\"" << num(Y(v)) << "\" width=\"" << num(bw - 1)
          << "\" height=\"" << num(T + ph - Y(v)) << "\" fill=\"" << b.colours[s % b.colours.size()]
          << "\"/>\n";
        text(o, x + bw / 2, Y(v) - 3, num(v, 2), "middle", 9);
      }
      text(o, x0 + g * gw + gw / 2, T + ph + 16, p.groups[g], "middle", 12);
    }
    if (b.reference >= 0) {
      o << "<line x1=\"" << num(x0) << "\" x2=\"" << num(x0 + panel_w) << "\" y1=\"" << num(Y(b.reference))
        << "\" y2=\"" << num(Y(b.reference)) << "\" stroke=\"#555\" stroke-dasharray=\"5 3\"/>\n";
    }
    o << "<rect x=\"" << num(x0) << "\" y=\"" << T << "\" width=\"" << panel_w << "\" height=\"" << ph
      << "\" fill=\"none\" stroke=\"#333\"/>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace sy::svg
