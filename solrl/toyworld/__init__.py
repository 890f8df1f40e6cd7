"""The offline toy text-to-image world: prompt grammar, renderer, verifier, base-model pretraining."""
