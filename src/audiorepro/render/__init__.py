"""Tables (CSV, Markdown, LaTeX), the self-contained HTML report with its inline SVG charts
(lines, bars, confusion heatmaps, DET curves) and the closing table a run prints."""
