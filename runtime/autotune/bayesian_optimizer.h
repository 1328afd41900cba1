// File: runtime/autotune/bayesian_optimizer.h
//
// Bayesian optimisation of a noisy score over the unit cube [0, 1]^d, some of whose dimensions
// may be binary (0 or 1): the search autotune runs (runtime/autotune/parameter_manager.h).
//
// The model is a Gaussian process (GaussianProcess): scores standardised to mean 0 and variance
// 1; a Matern 5/2 kernel of unit variance with one length scale for every dimension; a noise
// variance added to the diagonal, at most the configured one
// (HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE). Each fit picks the length scale and the noise (a
// fraction of the configured one, down to none) from fixed grids by the log marginal likelihood:
// clean measurements are then followed closely, noisy ones smoothed. The linear algebra is
// Eigen's Cholesky factorisation.
//
// The search (BayesianOptimizer): the caller's first sample (autotune's starting point), then a
// few space-filling points (a Latin hypercube of `initial_points` - 1 points), then at each step
// the point of largest expected improvement over the best posterior mean of the samples so far,
// maximised over random candidates followed by a coordinate search around the best few. Its
// choice at the end is the sample of the best posterior mean, which weighs a lucky measurement
// against its neighbours.
//
// Everything is a pure function of the samples given and the seed: the same calls return the
// same points.
//
// Thread-safety: thread-compatible.
#ifndef CHORUS_RUNTIME_AUTOTUNE_BAYESIAN_OPTIMIZER_H_
#define CHORUS_RUNTIME_AUTOTUNE_BAYESIAN_OPTIMIZER_H_

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

namespace chorus::runtime {

class GaussianProcess {
 public:
  // `noise`: the largest variance of a sample around the model, in units of the scores'
  // variance (>= 0; a jitter of 1e-6 is always added for a well-defined factorisation).
  explicit GaussianProcess(double noise);
  ~GaussianProcess();
  GaussianProcess(GaussianProcess&&) noexcept;
  GaussianProcess& operator=(GaussianProcess&&) noexcept;

  // Fits the model to points `x` (each of the same dimension, in [0, 1]) and their scores `y`.
  // REQUIRES: x.size() == y.size() >= 1.
  void Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);

  struct Prediction {
    double mean = 0;  // in the scores' units
    double sd = 0;    // of the latent score (the noise excluded)
  };
  // REQUIRES: Fit was called; x has the points' dimension.
  Prediction Predict(const std::vector<double>& x) const;

  // The length scale and the noise variance (jitter included) the last fit chose.
  double length_scale() const;
  double noise() const;
  // The scores' standard deviation at the last fit (what standardisation divided by).
  double score_scale() const;

 private:
  struct Model;
  double noise_;
  std::unique_ptr<Model> model_;
};

// The expected improvement over `best` of a score predicted as `p`, with a margin `xi` (in the
// scores' units) that favours exploration.
double ExpectedImprovement(const GaussianProcess::Prediction& p, double best, double xi);

struct BayesianOptimizerOptions {
  double noise = 0.8;      // GaussianProcess's
  uint64_t seed = 1;       // of every random choice
  int initial_points = 0;  // samples before the model guides: the caller's first and
                           // initial_points - 1 space-filling ones; 0: dims + 1
  int candidates = 1000;   // random points per maximisation of the expected improvement
  int refined = 5;         // of which the best few are refined by a coordinate search
  double xi = 0.01;        // exploration margin, in units of the scores' standard deviation
};

class BayesianOptimizer {
 public:
  // `binary[i]`: dimension i takes only 0 or 1. The dimension is binary.size() (>= 1).
  BayesianOptimizer(std::vector<bool> binary, BayesianOptimizerOptions options);

  int dims() const { return static_cast<int>(binary_.size()); }
  // Records `score` measured at `x` (in the cube; binary dimensions 0 or 1).
  void AddSample(std::vector<double> x, double score);
  // The next point to measure (see the file comment).
  std::vector<double> NextSample();
  // The index of the sample of the best posterior mean; -1 before the first sample.
  int BestSample() const;
  // The indices of the samples, by posterior mean, best first (ties: the earlier first); empty
  // before the first sample.
  std::vector<int> SamplesByMean() const;

  const std::vector<std::vector<double>>& points() const { return points_; }
  const std::vector<double>& scores() const { return scores_; }

 private:
  std::vector<double> RandomPoint();
  // Coordinate search from `x` for a larger `ei(x)`; returns the point and updates `*value`.
  template <typename F>
  std::vector<double> Refine(std::vector<double> x, double* value, const F& ei) const;

  std::vector<bool> binary_;
  BayesianOptimizerOptions options_;
  std::mt19937_64 rng_;
  std::vector<std::vector<double>> design_;  // the space-filling points, used in order
  std::vector<std::vector<double>> points_;
  std::vector<double> scores_;
};

}  // namespace chorus::runtime

#endif  // CHORUS_RUNTIME_AUTOTUNE_BAYESIAN_OPTIMIZER_H_
