"""Pieces several families share: tensor tables, checks, vocabularies and hyperparameters of a kind of layer
(latent attention, next-token prediction, state-space mixing, ...). Families import these; a part never imports a
family."""
