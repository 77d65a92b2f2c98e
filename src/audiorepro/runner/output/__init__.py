"""The output folder: staged publication, the manifest, attestation and signing keys,
the run index and the three outputs."""
