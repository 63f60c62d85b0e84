#!/usr/bin/env python3
"""compare_logits.py A B VOCAB - two gllmk-generate --logits-out files of
one prompt (float32 [steps, batch, vocab]), e.g. --tp 2 against --tp 1:
per step, the largest logit difference relative to the row's largest
|logit|, and whether the greedy tokens agree. A different token is accepted
only as a near tie (the two best logits of A within bf16's tolerance);
after it the sequences differ, so later steps are not compared. Exit 1 if a
step's logits differ by more than 6e-2 of max |logit| or a token differs
outside a tie."""
import sys

import numpy as np

TOLERANCE = 6e-2  # bf16, as tests/model.c: activations rounded through 32 layers, partial sums in another order


def main():
    a_path, b_path, vocab = sys.argv[1], sys.argv[2], int(sys.argv[3])
    a = np.fromfile(a_path, dtype="<f4").reshape(-1, vocab)
    b = np.fromfile(b_path, dtype="<f4").reshape(-1, vocab)
    if a.shape != b.shape:
        print(f"shapes differ: {a.shape} vs {b.shape}")
        return 1
    failed = False
    for step in range(a.shape[0]):
        scale = float(np.max(np.abs(a[step])))
        error = float(np.max(np.abs(a[step] - b[step]))) / scale
        ta, tb = int(np.argmax(a[step])), int(np.argmax(b[step]))
        note = "same token" if ta == tb else "different token"
        if ta != tb:
            margin = float(a[step][ta] - a[step][tb]) / scale
            tie = margin <= TOLERANCE
            note += f" ({ta} vs {tb}, margin {margin:.2g}: {'a near tie' if tie else 'NOT a tie'})"
            failed |= not tie
        failed |= error > TOLERANCE
        print(f"step {step}: logits within {error:.3g} of max |logit|, {note}")
        if ta != tb:
            print("later steps follow different tokens: not compared")
            break
    print("FAILED" if failed else "ok: tokens agree (or tie) and logits within tolerance")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
