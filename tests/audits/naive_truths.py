"""Independent reference implementations of the four ground-truth methods, for cross-checking the engine.

Written from the papers, in plain numpy (scipy only for GLAD's optimiser and the digamma function),
sharing no code with ``audits`` or crowd-kit. Every function takes the labels as three parallel
integer arrays -- ``items`` (0..n_items-1), ``workers`` (0..n_workers-1) and ``labels``
(0..n_classes-1) -- and returns ``(label, posterior)``: each item's label and its
``(n_items, n_classes)`` posterior (vote shares for majority vote) plus, where the model has them,
the worker parameters. Each fit runs to convergence (EM until the posteriors stop moving, GLAD's
optimiser to a tight gradient tolerance), not for a fixed number of steps, so it lands on the fixed
point the library's shorter runs approach.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import digamma, expit


def vote_counts(items, labels, n_items, n_classes):
    """``votes[i, k]``: how many workers gave item i the label k."""
    votes = np.zeros((n_items, n_classes))
    np.add.at(votes, (items, labels), 1.0)
    return votes


def majority(items, workers, labels, n_items, n_classes):
    """Majority vote. A tie goes to the tied label given most often over all items, then to the smallest.

    Returns ``(label, shares)``: the winner per item and each label's share of the item's votes.
    """
    votes = vote_counts(items, labels, n_items, n_classes)
    overall = votes.sum(axis=0)
    label = np.empty(n_items, dtype=int)
    for i in range(n_items):
        tied = [k for k in range(n_classes) if votes[i, k] == votes[i].max()]
        label[i] = max(tied, key=lambda k: (overall[k], -k))
    return label, votes / votes.sum(axis=1, keepdims=True)


def dawid_skene(items, workers, labels, n_items, n_workers, n_classes, tol=1e-12, max_iter=10_000):
    """Dawid & Skene (1979): class priors p_k and one confusion matrix per worker, fitted by EM.

    Model: P(worker w answers l | true class k) = pi[w, k, l]; items independent, workers
    independent given the true class. Start (the paper's suggestion) from the vote shares, then
    alternate the M-step (p = mean posterior; pi = posterior-weighted answer counts, each row
    normalised) and the E-step (posterior ∝ p_k · prod over the item's labels of pi[w, k, l]).

    Returns ``(label, posterior, pi, p)``.
    """
    posterior = vote_counts(items, labels, n_items, n_classes)
    posterior /= posterior.sum(axis=1, keepdims=True)
    for _ in range(max_iter):
        p = posterior.mean(axis=0)
        pi = np.zeros((n_workers, n_classes, n_classes))
        np.add.at(pi, (workers, slice(None), labels), posterior[items])
        # A zero count would make log pi = -inf and pin an item's posterior at 0 for good (a worker
        # with one label on an item the others settled): a floor far below any real count avoids it.
        pi = np.maximum(pi, 1e-10)
        pi /= pi.sum(axis=2, keepdims=True)
        log_post = np.tile(np.log(p), (n_items, 1))
        np.add.at(log_post, items, np.log(pi[workers, :, labels]))
        new = np.exp(log_post - log_post.max(axis=1, keepdims=True))
        new /= new.sum(axis=1, keepdims=True)
        done = np.abs(new - posterior).max() < tol
        posterior = new
        if done:
            break
    return posterior.argmax(axis=1), posterior, pi, p


def glad(items, workers, labels, n_items, n_workers, n_classes):
    """GLAD, Whitehill et al. (2009): worker ability alpha_w and item inverse difficulty beta_i = exp(b_i).

    Model: a worker gives the true class with probability sigma(alpha_w · beta_i) and each other class
    with probability (1 - sigma(alpha_w · beta_i)) / (K - 1); the class prior is uniform (held fixed).
    Priors alpha ~ N(1, 1) and b ~ N(1, 1), the ones crowd-kit uses, keep the MAP estimate finite.
    The paper fits the MAP estimate by EM; its fixed points are the stationary points of the
    marginal log-posterior, which this maximises directly from alpha = b = 1 (L-BFGS; the gradient
    of the marginal is the gradient of EM's Q at the current posterior).

    Returns ``(label, posterior, alpha, beta)``.
    """
    onehot = np.eye(n_classes)[labels]  # (n_labels, K): 1 where the label is that class

    def minus_log_posterior(theta):
        alpha, b = theta[:n_workers], theta[n_workers:]
        beta = np.exp(b[items])
        x = alpha[workers] * beta
        right = -np.logaddexp(0.0, -x)  # log sigma(x)
        wrong = -np.logaddexp(0.0, x) - np.log(n_classes - 1)  # log((1 - sigma(x)) / (K - 1))
        log_joint = -np.log(n_classes) + np.stack(
            [np.bincount(items, np.where(labels == k, right, wrong), n_items) for k in range(n_classes)], axis=1
        )
        top = log_joint.max(axis=1, keepdims=True)
        log_marginal = top[:, 0] + np.log(np.exp(log_joint - top).sum(axis=1))
        post = np.exp(log_joint - log_marginal[:, None])
        value = log_marginal.sum() - 0.5 * ((alpha - 1.0) ** 2).sum() - 0.5 * ((b - 1.0) ** 2).sum()
        g = (post[items] * onehot).sum(axis=1) - expit(x)  # d/dx of one label's expected log-likelihood
        grad_alpha = np.bincount(workers, g * beta, n_workers) - (alpha - 1.0)
        grad_b = np.bincount(items, g * x, n_items) - (b - 1.0)
        return -value, -np.concatenate([grad_alpha, grad_b]), post

    res = minimize(
        lambda t: minus_log_posterior(t)[:2],
        np.ones(n_workers + n_items),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-9, "ftol": 1e-15, "maxiter": 100_000},
    )
    alpha, b = res.x[:n_workers], res.x[n_workers:]
    post = minus_log_posterior(res.x)[2]
    return post.argmax(axis=1), post, alpha, np.exp(b)


def mace(
    items,
    workers,
    labels,
    n_items,
    n_workers,
    n_classes,
    tol=1e-12,
    max_iter=20_000,
    theta_prior=(0.5, 0.5),
    strategy_prior=10.0,
):
    """MACE, Hovy et al. (2013), with Variational-Bayes updates.

    Model: the true class T_i is uniform; worker j knows the answer (S_ij = 0, answers T_i) with
    probability theta_j and otherwise spams, answering from its own distribution xi_j. VB with a
    Beta(0.5, 0.5) prior on theta_j and a symmetric Dirichlet(10) prior on xi_j (crowd-kit's defaults):
    the M-step sets each weight to exp(E[log weight]) = exp(psi(count + prior) - psi(total + priors)),
    which need not sum to one. Start: theta = 1/2 for everybody, xi uniform.

    Returns ``(label, posterior, competence)``, competence being each worker's share of "knows" in
    the two weights, know / (know + spam).
    """
    know = np.full(n_workers, 0.5)
    spam = np.full(n_workers, 0.5)
    xi = np.full((n_workers, n_classes), 1.0 / n_classes)
    onehot = np.eye(n_classes)[labels]
    post = None
    for _ in range(max_iter):
        # E-step: P(T_i = t, answers) ∝ prod over i's labels of (know · [a = t] + spam · xi[a])
        per_label = know[workers, None] * onehot + (spam[workers] * xi[workers, labels])[:, None]
        log_joint = np.zeros((n_items, n_classes))
        np.add.at(log_joint, items, np.log(per_label))
        new = np.exp(log_joint - log_joint.max(axis=1, keepdims=True))
        new /= new.sum(axis=1, keepdims=True)
        # P(S_ij = 0 | answers): only T_i = a_ij lets a knowing worker answer a_ij
        knows = new[items, labels] * know[workers] / (know[workers] + spam[workers] * xi[workers, labels])
        know_count = np.bincount(workers, knows, n_workers)
        spam_count = np.bincount(workers, 1.0 - knows, n_workers)
        strategy = np.zeros((n_workers, n_classes))
        np.add.at(strategy, (workers, labels), 1.0 - knows)
        # VB M-step
        a0, b0 = theta_prior
        total = digamma(know_count + spam_count + a0 + b0)
        spam = np.exp(digamma(spam_count + a0) - total)
        know = np.exp(digamma(know_count + b0) - total)
        xi = np.exp(
            digamma(strategy + strategy_prior)
            - digamma(strategy.sum(axis=1, keepdims=True) + n_classes * strategy_prior)
        )
        done = post is not None and np.abs(new - post).max() < tol
        post = new
        if done:
            break
    return post.argmax(axis=1), post, know / (know + spam)
