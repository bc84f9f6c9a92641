# share/cdpool/: model cfgs and the worked example, installed under $(pkgdatadir).
cdpmodelsdir = $(pkgdatadir)/models
dist_cdpmodels_DATA = share/cdpool/models/unet.cfg share/cdpool/models/resunet.cfg \
	share/cdpool/models/classifier.cfg share/cdpool/models/resnet18.cfg \
	share/cdpool/models/resnet34.cfg share/cdpool/models/resnet50.cfg \
	share/cdpool/models/unet-resnet18.cfg share/cdpool/models/unet-resnet34.cfg \
	share/cdpool/models/unet-resnet50.cfg share/cdpool/models/fpn-resnet18.cfg \
	share/cdpool/models/fpn-resnet34.cfg share/cdpool/models/fpn-resnet50.cfg \
	share/cdpool/models/deeplabv3plus-resnet18.cfg share/cdpool/models/deeplabv3plus-resnet34.cfg \
	share/cdpool/models/deeplabv3plus-resnet50.cfg \
	share/cdpool/models/siamese-unet.cfg
cdpexamplesdir = $(pkgdatadir)/examples
dist_cdpexamples_DATA = share/cdpool/examples/Makefile share/cdpool/examples/README \
	share/cdpool/examples/roads.colors
dist_cdpexamples_SCRIPTS = share/cdpool/examples/genscene.py share/cdpool/examples/genpair.py \
	share/cdpool/examples/genmulti.py share/cdpool/examples/genvalue.py
dist_man_MANS += man/cdpool.7
