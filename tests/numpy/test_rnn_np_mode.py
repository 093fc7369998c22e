"""gluon.rnn under npx.set_np(), as d2l's concise RNN chapter uses it: begin_state gives
mx.np arrays, the layer takes and returns them, and a small character model trains."""
from minigluon import autograd, gluon, np, npx
from minigluon.gluon import nn, rnn


def test_d2l_style_rnn_model_runs_and_learns_in_np_mode():
    npx.set_np()
    vocab, hidden, steps, batch = 6, 16, 5, 4
    rnn_layer = rnn.RNN(hidden)
    rnn_layer.initialize()
    state = rnn_layer.begin_state(batch_size=1)
    assert len(state) == 1 and state[0].shape == (1, 1, hidden)
    assert isinstance(state[0], np.ndarray)
    Y, state_new = rnn_layer(np.random.uniform(size=(35, 1, vocab)), state)
    assert Y.shape == (35, 1, hidden) and state_new[0].shape == (1, 1, hidden)
    assert isinstance(Y, np.ndarray) and isinstance(state_new[0], np.ndarray)

    class RNNModel(nn.Block):
        def __init__(self, layer, vocab_size):
            super().__init__()
            self.rnn, self.vocab_size = layer, vocab_size
            self.dense = nn.Dense(vocab_size)

        def forward(self, inputs, state):
            X = npx.one_hot(inputs.T, self.vocab_size)
            Y, state = self.rnn(X, state)
            return self.dense(Y.reshape(-1, Y.shape[-1])), state

    # the sequence 0 1 2 3 4 5 0 1 ...: the next token is the current one plus 1
    tokens = np.array([[(i + j) % vocab for j in range(steps + 1)] for i in range(batch)])
    net = RNNModel(rnn.GRU(hidden), vocab)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.05})
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    X, target = tokens[:, :-1], tokens[:, 1:].T.reshape(-1)
    for _ in range(60):
        state = net.rnn.begin_state(batch_size=batch)
        with autograd.record():
            out, state = net(X, state)
            loss = loss_fn(out, target).mean()
        loss.backward()
        trainer.step(1)
    assert float(loss) < 0.05
    assert (out.argmax(axis=1) == target).all()
