"""End-to-end sealing of one shard for its aggregator: X25519 key agreement + AES-256-GCM.

When shards travel through a relay (Flower's SuperLink routes every message), the relay must
see only ciphertext, or it would see every update whole and sharding would protect nothing.
Client ``k`` and aggregator ``j`` agree on a key from their X25519 keys (HKDF-SHA256), and
the shard is encrypted with AES-GCM under a fresh 96-bit nonce; the round, sender, receiver
and shard index are bound as associated data, so the relay can neither read a shard nor
pass it off as another one. Needs ``cryptography`` (the ``flower`` extra).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

NONCE_BYTES = 12
_INFO = b"eris-fl shard sealing v1"


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import x25519
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM
        from cryptography.hazmat.primitives.kdf.hkdf import HKDF
    except ImportError as exc:
        raise ImportError(
            "sealing shards needs 'cryptography': pip install 'eris-fl[flower]'"
        ) from exc
    return hashes, serialization, x25519, AESGCM, HKDF


@dataclass(frozen=True)
class KeyPair:
    """A node's X25519 key pair, as raw 32-byte strings."""

    private: bytes
    public: bytes

    @classmethod
    def generate(cls) -> KeyPair:
        """A fresh key pair from the OS's random source."""
        _, serialization, x25519, _, _ = _crypto()
        key = x25519.X25519PrivateKey.generate()
        raw = serialization.Encoding.Raw
        private = key.private_bytes(
            raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        return cls(private, key.public_key().public_bytes(raw, serialization.PublicFormat.Raw))


def shard_label(round: int, sender: int, receiver: int, shard: int) -> bytes:
    """The associated data that binds a sealed shard to its place in the protocol."""
    return f"eris round={round} from={sender} to={receiver} shard={shard}".encode()


def _key(own_private: bytes, peer_public: bytes) -> Any:
    hashes, _, x25519, AESGCM, HKDF = _crypto()
    own = x25519.X25519PrivateKey.from_private_bytes(own_private)
    shared = own.exchange(x25519.X25519PublicKey.from_public_bytes(peer_public))
    return AESGCM(HKDF(hashes.SHA256(), 32, salt=None, info=_INFO).derive(shared))


def seal_shard(shard: torch.Tensor, own_private: bytes, peer_public: bytes, label: bytes) -> bytes:
    """Encrypt ``shard`` (1-D, CPU) for the holder of ``peer_public``: nonce + ciphertext + tag."""
    nonce = os.urandom(NONCE_BYTES)
    payload = shard.detach().cpu().contiguous().numpy().tobytes()
    return nonce + _key(own_private, peer_public).encrypt(nonce, payload, label)


def open_shard(
    sealed: bytes, own_private: bytes, peer_public: bytes, label: bytes, dtype: torch.dtype
) -> torch.Tensor:
    """Decrypt a shard sealed by the holder of ``peer_public`` for us.

    Raises:
        cryptography.exceptions.InvalidTag: If it was altered, sealed for another node, or
            relabelled (another round, sender or shard).
    """
    nonce, body = sealed[:NONCE_BYTES], sealed[NONCE_BYTES:]
    payload = _key(own_private, peer_public).decrypt(nonce, body, label)
    np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
    return torch.from_numpy(np.frombuffer(payload, dtype=np_dtype).copy())
