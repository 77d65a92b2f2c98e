"""The data files a user gives or receives: embedding dumps (with and without texts), audio,
captions, probe predictions and inputs, ESC-50 metadata, TREC runs and judgements (as trec_eval
reads them, numbers as C reads them), speaker-verification trial lists and speakers, HEAR task
folders and heareval's embeddings layout, and a prepared dataset's coverage."""
