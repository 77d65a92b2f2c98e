"""CLAP pipelines (Hugging Face and laion-clap), the checkpoint registry and identity checks."""
