"""LSTM layers. ``lstm`` runs over a sequence inside one sample ([timesteps, features] per sample); ``internal_lstm``
is recurrent across timesteps of an episode: its state (c, h), per-sample shape (2, size), is an internal the
agent carries from one ``act`` to the next, starting at zeros.

Both start their forget gates at a bias of 1 (TensorFlow's LSTMCell ``forget_bias``), other biases at 0.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torchforce.core.networks.base import SMALLER, Layer, Value, expect_rank
from torchforce.core.networks.layers import check_options
from torchforce.spec import expect_bool, expect_float, expect_int
from torchforce.spec.checks import expect_elements, expect_float32


@torch.no_grad()
def _forget_bias(bias_ih: Tensor, bias_hh: Tensor, size: int, value: float) -> None:
    bias_ih.zero_()
    bias_hh.zero_()
    bias_ih[size : 2 * size] = value  # torch's gate order: input, forget, cell, output


def _check_gates(in_size: int, size: int, path: str) -> None:
    """The four gates' weights, [4 * size, in_size + size], fit in one tensor (``MAX_ELEMENTS``)."""
    expect_elements(
        4 * size * (in_size + size), f"{path}.size", f"the LSTM weights [{4 * size}, {in_size + size}]", hint=SMALLER
    )


def _dropout_rate(value: Any, path: str) -> float:
    return expect_float(value, path, minimum=0.0, maximum=0.999, allow_none=True) or 0.0


class Lstm(Layer):
    """An LSTM over the timesteps of each sample. ``return_final_state``: output the final (c, h) concatenated,
    [2 * size]; else the output sequence, [timesteps, size]. ``dropout`` applies to the output in training."""

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        size: int,
        dropout: float | None = None,
        return_final_state: bool = True,
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        expect_rank(incoming, 2, path, "lstm", "[timesteps, features]")
        size = expect_int(size, f"{path}.size", minimum=1)
        self.dropout = _dropout_rate(dropout, f"{path}.dropout")
        self.uses_training_mode = bool(self.dropout)
        self.return_final_state = expect_bool(return_final_state, f"{path}.return_final_state")
        _check_gates(incoming.shape[1], size, path)
        self.lstm = nn.LSTM(incoming.shape[1], size, batch_first=True)
        _forget_bias(self.lstm.get_parameter("bias_ih_l0"), self.lstm.get_parameter("bias_hh_l0"), size, 1.0)
        self.output = Value((2 * size,) if self.return_final_state else (incoming.shape[0], size))

    def forward(self, x: Tensor) -> Tensor:
        sequence, (h, c) = self.lstm(x)
        y = torch.cat((c[0], h[0]), dim=1) if self.return_final_state else sequence
        return F.dropout(y, self.dropout, self.training) if self.dropout else y


class InternalLstm(Layer):
    """An LSTM cell stepped once per timestep; its (c, h) state is the network internal ``internal_lstm<k>``.
    Output: h, [size]. ``lstmcell_args``: ``{"forget_bias": 1.0}``."""

    kind = "recurrent"

    def __init__(
        self,
        *,
        incoming: Value,
        path: str,
        size: int,
        dropout: float | None = None,
        lstmcell_args: dict | None = None,
    ) -> None:
        super().__init__(incoming=incoming, path=path)
        expect_rank(incoming, 1, path, "internal_lstm", "[features]")
        size = expect_int(size, f"{path}.size", minimum=1)
        args = check_options(lstmcell_args, f"{path}.lstmcell_args", ("forget_bias",))
        self.dropout = _dropout_rate(dropout, f"{path}.dropout")
        self.uses_training_mode = bool(self.dropout)
        _check_gates(incoming.shape[0], size, path)
        self.cell = nn.LSTMCell(incoming.shape[0], size)
        _forget_bias(
            self.cell.bias_ih,
            self.cell.bias_hh,
            size,
            expect_float32(args.get("forget_bias", 1.0), f"{path}.lstmcell_args.forget_bias"),
        )
        self.internal_shape = (2, size)
        self.output = Value((size,))

    def forward(self, x: Tensor, state: Tensor) -> tuple[Tensor, Tensor]:
        h, c = self.cell(x, (state[:, 1], state[:, 0]))
        y = F.dropout(h, self.dropout, self.training) if self.dropout else h
        return y, torch.stack((c, h), dim=1)
