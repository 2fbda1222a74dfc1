// Small self-contained SVG charts for the analysis reports: line plots, heatmaps and
// grouped bar charts, each with a title, axis labels and a legend.
#pragma once

#include <string>
#include <vector>

namespace sy::svg {

struct Series {
  std::string name;
  std::vector<double> x, y;
  std::string colour;
  bool dashed = false;
  bool markers = true;
};

struct LinePlot {
  std::string title, subtitle, x_label, y_label;
  double x_min = 0, x_max = 1, y_min = 0, y_max = 1;
  bool x_percent = false, y_percent = false;  // tick labels as percentages
  std::vector<Series> series;
};
std::string line_plot(const LinePlot& p);

struct Heatmap {
  std::string title, subtitle, x_label, y_label, legend_label;
  int rows = 0, cols = 0;
  std::vector<double> value;  // rows * cols, row-major; drawn in [0, vmax]
  double vmax = 1;
  double x_min = 0, x_max = 1;          // the x-axis range the columns span, left to right
  std::vector<std::string> row_labels;  // one per row (bottom row first)
};
std::string heatmap(const Heatmap& h);

struct BarPanel {
  std::string title, y_label;
  std::vector<std::string> groups;          // x-axis categories
  std::vector<std::vector<double>> values;  // [group][series]
};
struct BarChart {
  std::string title, subtitle;
  std::vector<std::string> series;  // legend entries, one colour each
  std::vector<std::string> colours;
  std::vector<BarPanel> panels;  // side by side, sharing the legend
  double reference = -1;         // a dashed horizontal line at this value (< 0: none)
  std::string reference_label;
};
std::string bar_chart(const BarChart& b);

// The palette used for policies and methods, by index.
const std::string& colour(int i);

}  // namespace sy::svg
