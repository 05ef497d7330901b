

def test_inputs_without_columns_are_named_as_such():
    import spherelab as sl

    with pytest.raises(ValueError, match="X must have at least one input column"):
        sl.VISH(sl.kernels.Matern(1.5), 2).fit(np.zeros((10, 0)), np.zeros(10))
