"""config.json's vocabulary (docs/SPEC.md section 4): its keys, the paper's MNIST sizes, the
attentions, activations and feature maps. Plain data, importable without numpy or torch, so that
the tools parse their arguments (--help) before their heavy imports; tarnn_model.py re-exports
every name.
"""

FORMAT_VERSION = 1

MNIST_CONFIG = dict(height=28, width=28, channels=1, n_layers=8, n_heads=8, d_head=32,
                    d_model=256, d_ff=1024, activation="relu", mixtures=10, attention="linear")

CONFIG_KEYS = ("height", "width", "channels", "n_layers", "n_heads", "d_head", "d_model", "d_ff",
               "activation", "mixtures", "attention")
OPTIONAL_KEYS = ("feature_map",)  # linear attention's phi; absent: elu + 1 (SPEC section 1)
FILE_KEYS = ("format_version", "model_type")  # config.json's own, beside the model's
ATTENTIONS = ("linear", "softmax")
ACTIVATIONS = ("relu", "gelu")

# SPEC section 1, "Feature maps": each kind, the fast-transformers class it is, and the parameters
# config.json may give it (the class's own arguments). Random-feature maps store their matrix
# omega; how it was drawn (orthogonal, redraw, deterministic_eval) does not change what a stored
# omega computes, so those are taken and not used.
FEATURE_MAPS = {
    "elu+1": ("elu_feature_map", ()),
    "relu": ("ActivationFunctionFeatureMap(torch.relu)", ()),
    "random_fourier": ("RandomFourierFeatures", ("n_dims", "softmax_temp")),
    "smoothed_random_fourier": ("SmoothedRandomFourierFeatures",
                                ("n_dims", "softmax_temp", "smoothing")),
    "favor": ("Favor", ("n_dims", "softmax_temp", "stabilize")),
    "generalized_random": ("GeneralizedRandomFeatures", ("n_dims", "softmax_temp", "kernel_fn")),
}
DRAWING_KEYS = ("orthogonal", "redraw", "deterministic_eval")
KERNEL_FNS = ("relu", "elu+1")  # generalized_random's kernel_fn
