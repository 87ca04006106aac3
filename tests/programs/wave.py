"""difftaichi's wave (examples/wave.py): the initial height field of a 2D wave equation optimised so that
the wave forms a target image after `steps` steps, headless.

Source: https://github.com/taichi-dev/difftaichi/blob/9f4ee522a0a01e6b1aae1d3551c7fd1f6ed56081/examples/wave.py
Changes: `import taichi as ti` -> `import qd as ti`; `ti.init(default_fp=real, arch=ti.cuda)` left to the
loader's caller; OpenCV's windows and image files removed (`forward(output)` writes nothing, `options.iters` is
the constant `iters`, `main` returns the losses); the target, `taichi.png` less its mean and resized to the
grid, is `target_image()`, a synthetic image of the same kind (a centred ring less its mean), since the port
reads no files.
"""
# ruff: noqa (published code, kept as it was: the point is that it runs unchanged)
import qd as ti
import math
import numpy as np

real = ti.f32

n_grid = 256
dx = 1 / n_grid
inv_dx = 1 / dx
dt = 3e-4
max_steps = 512
vis_interval = 32
output_vis_interval = 2
steps = 256
assert steps * 2 <= max_steps
amplify = 1

scalar = lambda: ti.field(dtype=real)
vec = lambda: ti.Vector(2, dtype=real)

p = scalar()
target = scalar()
initial = scalar()
loss = scalar()


def allocate_fields():
    ti.root.dense(ti.i, max_steps).dense(ti.jk, n_grid).place(p)
    ti.root.dense(ti.i, max_steps).dense(ti.jk, n_grid).place(p.grad)
    ti.root.dense(ti.ij, n_grid).place(target)
    ti.root.dense(ti.ij, n_grid).place(target.grad)
    ti.root.dense(ti.ij, n_grid).place(initial)
    ti.root.dense(ti.ij, n_grid).place(initial.grad)
    ti.root.place(loss)
    ti.root.place(loss.grad)


c = 340
# damping
alpha = 0.00000
inv_dx2 = inv_dx * inv_dx
dt = (math.sqrt(alpha * alpha + dx * dx / 3) - alpha) / c
learning_rate = 1


@ti.func
def get_p(t, i, j):
    return p[t, i, j] if 0 <= i < n_grid and 0 <= j < n_grid else 0


@ti.func
def laplacian(t, i, j):
    return inv_dx2 * (-4 * get_p(t, i, j) + get_p(t, i, j - 1) + get_p(t, i, j + 1) +
                      get_p(t, i + 1, j) + get_p(t, i - 1, j))


@ti.kernel
def initialize():
    for i in range(n_grid):
        for j in range(n_grid):
            p[0, i, j] = initial[i, j]


@ti.kernel
def fdtd(t: ti.i32):
    for i in range(n_grid):  # Parallelized over GPU threads
        for j in range(n_grid):
            laplacian_p = laplacian(t - 2, i, j)
            laplacian_q = laplacian(t - 1, i, j)
            p[t, i, j] = 2 * p[t - 1, i, j] + (
                c * c * dt * dt + c * alpha * dt) * laplacian_q - p[
                    t - 2, i, j] - c * alpha * dt * laplacian_p


@ti.kernel
def compute_loss(t: ti.i32):
    for i in range(n_grid):
        for j in range(n_grid):
            loss[None] += dx * dx * (target[i, j] - p[t, i, j])**2


@ti.kernel
def apply_grad():
    # gradient descent
    for i, j in initial.grad:
        initial[i, j] -= learning_rate * initial.grad[i, j]

@ti.ad.no_grad
@ti.kernel
def get_image(img: ti.types.ndarray(), t: ti.i32):
    for i, j in ti.ndrange(n_grid, n_grid):
        img[i, j] = p[t, i, j] * amplify + 0.5


def forward(output=None):
    steps_mul = 1
    interval = vis_interval
    if output:
        steps_mul = 2
        interval = output_vis_interval
    initialize()
    for t in range(2, steps * steps_mul):
        fdtd(t)
        if (t + 1) % interval == 0:
            img = np.zeros(shape=(n_grid, n_grid), dtype=np.float32)
            get_image(img, t)
    compute_loss(steps - 1)


@ti.kernel
def fill_target(img: ti.types.ndarray()):
    for i, j in ti.ndrange(n_grid, n_grid):
        target[i, j] = float(img[i, j])


def target_image():
    i, j = np.meshgrid(np.arange(n_grid), np.arange(n_grid), indexing='ij')
    r = np.hypot(i - n_grid / 2, j - n_grid / 2)
    img = ((r > n_grid / 6) & (r < n_grid / 3)).astype(np.float64)
    return img - img.mean()


iters = 200


def main():
    # initialization
    target_img = target_image()
    allocate_fields()
    # print(target_img.min(), target_img.max())
    fill_target(target_img)

    if False:
        # this is not too exciting...
        initial[n_grid // 2, n_grid // 2] = -2
        forward('center')
        initial[n_grid // 2, n_grid // 2] = 0

    losses = []
    for opt in range(iters):
        with ti.ad.Tape(loss):
            output = None
            if opt % 20 == 19:
                output = 'wave/iter{:03d}/'.format(opt)
            forward(output)

        losses.append(loss[None])

        apply_grad()

    forward('optimized')
    return losses
