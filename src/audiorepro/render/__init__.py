"""Tables (CSV, Markdown, LaTeX) and the self-contained HTML report."""
