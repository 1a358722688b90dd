"""Features: networks applied to data, cached -- the layer above :mod:`lib.data` and :mod:`lib.nets`.

* :mod:`lib.features.frozen` -- the on-disk feature cache and :class:`~lib.features.frozen.FeatureBundle`
  (frozen features as a data set, with FGR's filtered copies).
* :mod:`lib.features.pacs_features` -- leave-one-domain-out PACS as frozen features.
* :mod:`lib.features.cifar_features` -- CIFAR-10 / CIFAR-10H as frozen stage activations."""
