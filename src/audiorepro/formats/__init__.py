"""The data files a user gives or receives: dumps, audio, captions, probe predictions."""
