"""Oracle tests for mx.np's shape functions, indexing, dot and matmul: values against NumPy,
NumPy's shape rules (0-d results, -1 and 0 in reshape) and gradients."""
import numpy as onp
import pytest

from minigluon import np
from minigluon.base import ShapeError
from gradcheck import check_grad, rand
from nphelpers import check_np

A = onp.arange(24, dtype="float32").reshape(2, 3, 4)


@pytest.mark.parametrize("shape", [(6, 4), (-1,), (4, -1, 2), (24,), (1, 2, 12)])
def test_reshape_matches_numpy(shape):
    check_np(np.reshape(np.array(A), shape), A.reshape(shape))
    check_np(np.array(A).reshape(*shape), A.reshape(*shape))


def test_reshape_zero_is_a_zero_size_axis_not_a_copy():
    check_np(np.zeros((0, 3)).reshape(0, 5), onp.zeros((0, 5), "float32"))
    with pytest.raises(ShapeError, match="cannot reshape an array of shape"):
        np.array(A).reshape(0, -1)


@pytest.mark.parametrize("axes", [None, (1, 0, 2), (2, 0, 1)])
def test_transpose_matches_numpy(axes):
    check_np(np.transpose(np.array(A), axes), onp.transpose(A, axes))
    if axes is not None:
        check_np(np.array(A).transpose(*axes), A.transpose(*axes))
    check_np(np.array(A).T, A.T)


def test_swapaxes_expand_dims_ravel_flatten():
    check_np(np.swapaxes(np.array(A), 0, 2), onp.swapaxes(A, 0, 2))
    check_np(np.expand_dims(np.array(A), 1), onp.expand_dims(A, 1))
    check_np(np.expand_dims(np.array(A), -1), onp.expand_dims(A, -1))
    check_np(np.ravel(np.array(A)), A.ravel())
    check_np(np.array(A).flatten(), A.flatten())


@pytest.mark.parametrize("shape,axis", [((1, 3, 1), None), ((1, 3, 1), 0), ((1, 3, 1), (0, 2)),
                                        ((1, 1), None), ((1,), 0)])
def test_squeeze_matches_numpy_including_0d(shape, axis):
    a = onp.ones(shape, "float32")
    check_np(np.squeeze(np.array(a), axis), onp.squeeze(a, axis))


@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_concatenate_matches_numpy(axis):
    parts = [A, A + 1]
    check_np(np.concatenate([np.array(p) for p in parts], axis=axis),
             onp.concatenate(parts, axis=axis))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_stack_matches_numpy(axis):
    check_np(np.stack([np.array(A), np.array(A * 2)], axis=axis), onp.stack([A, A * 2], axis))


@pytest.mark.parametrize("spec,axis", [(2, 0), (3, 1), (1, 2), ([1, 3], 2), ([2], 1)])
def test_split_matches_numpy(spec, axis):
    got = np.split(np.array(A), spec, axis=axis)
    want = onp.split(A, spec, axis=axis)
    assert isinstance(got, list) and len(got) == len(want)
    for g, w in zip(got, want):
        check_np(g, w)


def test_split_into_unequal_sections_says_so():
    with pytest.raises(ShapeError, match="equal parts"):
        np.split(np.array(A), 5, axis=2)


@pytest.mark.parametrize("reps", [2, (2, 1), (1, 2, 1, 2)])
def test_tile_matches_numpy(reps):
    check_np(np.tile(np.array(A[0]), reps), onp.tile(A[0], reps))


@pytest.mark.parametrize("axis", [None, 0, 2])
def test_repeat_and_flip_match_numpy(axis):
    check_np(np.repeat(np.array(A), 2, axis=axis), onp.repeat(A, 2, axis=axis))
    check_np(np.flip(np.array(A), axis=axis), onp.flip(A, axis=axis))


@pytest.mark.parametrize("fn", [
    lambda a: np.reshape(a, (3, 2)), lambda a: np.transpose(a), lambda a: np.tile(a, (2, 1)),
    lambda a: np.repeat(a, 2, axis=1), lambda a: np.flip(a, axis=0),
    lambda a: np.expand_dims(a, 0), lambda a: np.squeeze(np.expand_dims(a, 0)),
    lambda a: np.concatenate([a, a * 2], axis=1), lambda a: np.stack([a, a * 3], axis=1),
    lambda a: np.split(a, [1], axis=1),
])
def test_shape_gradients(fn):
    check_grad(fn, rand(2, 3))


@pytest.mark.parametrize("key", [1, -1, (1, 2), (0, 1, 3), slice(0, 1), (Ellipsis, 2),
                                 (slice(None), None, 1), ([0, 1], [2, 0])])
def test_getitem_matches_numpy_including_0d(key):
    check_np(np.array(A)[key], A[key])


def test_getitem_with_mx_index_arrays():
    idx = onp.array([1, 0, 1])
    check_np(np.array(A)[np.array(idx, dtype="int64")], A[idx])
    mask = A > 10
    check_np(np.array(A)[np.array(A) > 10], A[mask])


def test_getitem_gradient_adds_repeated_indices():
    check_grad(lambda a: a[1], rand(3, 2))
    check_grad(lambda a: a[0, 1], rand(3, 2))
    check_grad(lambda a: a.as_np_ndarray()[onp.array([0, 2, 0])], rand(3, 2))


def test_iterating_gives_rows_and_0d_elements():
    rows = list(np.array(A[0]))
    assert len(rows) == 3 and rows[0].shape == (4,)
    assert [e.shape for e in np.arange(3)] == [(), (), ()]


DOT_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
              ((2, 2, 3), (3, 4)), ((2, 3), (4, 3, 5)), ((), (2, 3))]


@pytest.mark.parametrize("shapes", DOT_SHAPES)
def test_dot_matches_numpy(shapes):
    a, b = rand(*shapes[0]).astype("float32"), rand(*shapes[1], seed=1).astype("float32")
    a = a if shapes[0] else onp.float32(1.5)
    check_np(np.dot(np.array(a), np.array(b)), onp.dot(a, b), rtol=1e-5)


MATMUL_SHAPES = [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                 ((5, 2, 3), (3, 4)), ((5, 1, 2, 3), (4, 3, 2)), ((4,), (2, 4, 3))]


@pytest.mark.parametrize("shapes", MATMUL_SHAPES)
def test_matmul_matches_numpy(shapes):
    a, b = rand(*shapes[0]).astype("float32"), rand(*shapes[1], seed=1).astype("float32")
    check_np(np.matmul(np.array(a), np.array(b)), onp.matmul(a, b), rtol=1e-5)
    check_np(np.array(a) @ np.array(b), a @ b, rtol=1e-5)


@pytest.mark.parametrize("shapes", DOT_SHAPES[:-1])
def test_dot_gradients(shapes):
    check_grad(np.dot, rand(*shapes[0]), rand(*shapes[1], seed=1))


@pytest.mark.parametrize("shapes", MATMUL_SHAPES)
def test_matmul_gradients(shapes):
    check_grad(np.matmul, rand(*shapes[0]), rand(*shapes[1], seed=1))


def test_matmul_misaligned_shapes_name_both():
    with pytest.raises(ShapeError, match=r"\(2, 3\) and \(4, 5\)"):
        np.matmul(np.ones((2, 3)), np.ones((4, 5)))


def test_dot_mixes_dtypes():
    check_np(np.dot(np.ones((2, 3), dtype="int32"), np.ones(3)), onp.full(2, 3.0, "float32"))


def test_in_place_update_keeps_the_buffer():
    x = np.zeros(3)
    alias = x
    x += 1
    x[1] = 5
    assert alias is x
    check_np(x, [1.0, 5.0, 1.0], dtype="float32")
