"""The Hugging Face transformers side of the models (docs/huggingface.md).

configuration_brt (BrtConfig) and modeling_brt (BrtForCausalLM) run from the package as they
are; `brt-dist export --hf DIR CHECKPOINT` writes copies of them, and of the modules they import,
into a flat folder that `AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)`
loads. Both work without transformers too, on small stand-ins (named where they are defined).
"""
