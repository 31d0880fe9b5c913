"""A vision-language model's image encoder: its size, how an image becomes patches and tokens, and its reader.

An image (or each of its tiles) of image_size x image_size pixels is cut into (image_size / patch_size)^2 patches,
which the encoder computes on (2 x encoder parameters FLOPs per patch); they come out as tokens_per_image tokens
of the language model's prompt (fewer than the patches when the encoder merges neighbours, as Qwen2.5-VL merges
2 x 2). A tiling encoder (Llama 3.2 Vision) cuts an image into `tiles` tiles of image_size, each giving
tokens_per_tile tokens. The model's own parameter counts are its language model's; the encoder's weights add to
them in memory, on the pipeline's first stage, split by tensor parallelism as the decoder's are.
"""

from __future__ import annotations

from dataclasses import dataclass

from yaml.nodes import Node

from pool_registry.yamlread import Reader

KEYS = ("encoder_params_b", "encoder_layers", "hidden_size", "patch_size", "image_size", "tiles", "tokens_per_image",
        "tokens_per_tile", "bytes_per_param")


@dataclass(frozen=True)
class Vision:
    """The image encoder of a vision-language model."""

    encoder_params_b: float
    encoder_layers: int
    hidden_size: int
    patch_size: int           # pixels per side of a patch
    image_size: int           # pixels per side of an image, or of one tile when tiled
    tokens_per_image: int     # prompt tokens one image becomes
    tiles: int = 1            # tiles an image is cut into (1: not tiled)
    bytes_per_param: float = 0.0  # 0: the model's own

    @property
    def patches_per_image(self) -> int:
        """Patches the encoder computes on for one image: tiles x (image_size / patch_size)^2."""
        return self.tiles * (self.image_size // self.patch_size) ** 2 if self.patch_size else 0

    def weight_bytes(self, model_bytes_per_param: float) -> float:
        """Bytes of the encoder's weights, in its own format or else the model's."""
        return self.encoder_params_b * 1e9 * (self.bytes_per_param or model_bytes_per_param)


def read_vision(r: Reader, node: Node, path: str) -> Vision:
    """The `vision:` block of a model, every problem reported at its line."""
    f = r.mapping(node, path, required=("encoder_params_b", "encoder_layers", "hidden_size", "patch_size",
                                        "image_size"), optional=KEYS[5:])

    def count(key: str, default: int = 0) -> int:
        return r.optional(f, key, path, lambda n, p: r.integer(n, p, gt=0), default)

    v = Vision(encoder_params_b=r.optional(f, "encoder_params_b", path, lambda n, p: r.number(n, p, gt=0), 0.0),
               encoder_layers=count("encoder_layers"), hidden_size=count("hidden_size"),
               patch_size=count("patch_size"), image_size=count("image_size"), tiles=count("tiles", 1),
               tokens_per_image=0,
               bytes_per_param=r.optional(f, "bytes_per_param", path, lambda n, p: r.number(n, p, gt=0), 0.0))
    per_image, per_tile = count("tokens_per_image"), count("tokens_per_tile")
    if not f:  # not a mapping, already reported
        pass
    elif "tokens_per_image" in f and "tokens_per_tile" in f:
        r.fail(f["tokens_per_tile"], f"{path}.tokens_per_tile",
               "expected tokens_per_image or tokens_per_tile (with tiles), not both")
    elif "tokens_per_image" not in f and "tokens_per_tile" not in f:
        r.fail(node, f"{path}.tokens_per_image", "missing required field (or tokens_per_tile with tiles)")
    elif "tokens_per_tile" in f and "tiles" not in f:
        r.fail(f["tokens_per_tile"], f"{path}.tiles", "tokens_per_tile is given, so tiles (per image) is expected too")
    tokens = per_image or per_tile * v.tiles
    if v.patch_size and v.image_size and v.image_size % v.patch_size:
        r.fail(f["image_size"], f"{path}.image_size",
               f"image_size {v.image_size} px is not a whole number of {v.patch_size}-px patches")
    patches = v.patches_per_image
    # an encoder merges patches into fewer tokens, or keeps them, plus at most a class token per tile
    if tokens and patches and tokens > patches + v.tiles:
        key = "tokens_per_image" if "tokens_per_image" in f else "tokens_per_tile"
        r.fail(f[key], f"{path}.{key}", f"{tokens} tokens per image exceed the {patches} patches of "
               f"{v.tiles} x ({v.image_size} / {v.patch_size})^2 the encoder makes of it")
    return Vision(**{**v.__dict__, "tokens_per_image": tokens})


def vision_to_dict(v: Vision) -> dict[str, float | int]:
    """The block as the registry writes it (tokens per whole image; tiles only when tiled)."""
    out: dict[str, float | int] = {"encoder_params_b": v.encoder_params_b, "encoder_layers": v.encoder_layers,
                                   "hidden_size": v.hidden_size, "patch_size": v.patch_size,
                                   "image_size": v.image_size}
    if v.tiles > 1:
        out["tiles"] = v.tiles
    out["tokens_per_image"] = v.tokens_per_image
    if v.bytes_per_param:
        out["bytes_per_param"] = v.bytes_per_param
    return out
