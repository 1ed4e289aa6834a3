-- Does one model for many languages transfer across them, and what does the
-- language sampling do?  mBERT (Devlin et al. 2019; Pires et al. 2019; Wu &
-- Dredze 2019) pretrains one vocabulary and one model on 104 Wikipedias,
-- sampling languages with exponent 0.7, and transfers zero-shot: fine-tuned
-- on English, tested on other languages.  XLM-R (Conneau et al. 2020) found
-- 0.3 better for low-resource languages at some cost to high-resource ones.
-- Four cells at equal tokens: English alone (the control), and the
-- multilingual corpus (sh tools/fetch_data.sh multilingual) at alpha 1 (the
-- corpus' own shares), 0.7 and 0.3; every cell scored by the cross-lingual
-- suites (XNLI, PAWS-X, UD POS from English) and its per-language table.
--
--   lua5.4 experiments/ablate.lua experiments/ablations/multilingual.lua --shard 1/2 --threads 1 &
--   lua5.4 experiments/ablate.lua experiments/ablations/multilingual.lua --shard 2/2 --threads 1
--
-- Budget: 20,000 steps x 32 x 128 per cell on BERT-mini (as the nsp grid),
-- a Unigram vocabulary of 16,000 trained on each cell's own text (mixed by
-- its alpha).  At this scale the multilingual corpus is 6.2M words of
-- English and 0.05-0.8M words (2-7 MB where unspaced) of each of thirteen
-- evaluation languages (the Spanish Bible, npm quran-json, Debian's fortune
-- files, Japanese manual pages and LibreOffice help: docs/multilingual.md),
-- 10k words of Bulgarian, and the UDHR's few pages of Swahili and Thai:
-- what transfers to those is what a shared vocabulary and a handful of
-- repeated paragraphs give, and the table says so per language (fertility
-- and unknown rates are printed when each cell pretrains).
return {
  name = "multilingual",
  description = "English-only vs one multilingual model at language-sampling exponents 1, 0.7 (mBERT) and 0.3 " ..
    "(XLM-R), zero-shot from English on XNLI, PAWS-X and UD POS.",
  axes = {
    {name = "corpus", values = {
      {label = "english", corpus = "english"},
      {label = "multilingual-a1", corpus = "multilingual", lang_alpha = 1},
      {label = "multilingual-a0.7", corpus = "multilingual", lang_alpha = 0.7},
      {label = "multilingual-a0.3", corpus = "multilingual", lang_alpha = 0.3},
    }},
  },
  fixed = {model = "mini", objective = "mlm", tokenizer = "unigram", vocab_size = 16000,
           batch_size = 32, seq_len = 128, masking = "dynamic", log_every = 50, snapshots = "0.25"},
  seeds = {1},
  budget = {steps = 20000},
  evaluation = {tasks = {"xnli", "pawsx", "pos-xling"}, seeds = {1, 2, 3, 4, 5}, from_scratch_control = true},
}
