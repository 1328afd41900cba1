#include "runtime/autotune/bayesian_optimizer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include <Eigen/Cholesky>
#include <Eigen/Core>

namespace chorus::runtime {
namespace {

// Length scales the fit chooses from (the cube's side is 1), and the fractions of the configured
// noise.
constexpr double kLengthScales[] = {0.05, 0.1, 0.15, 0.25, 0.4, 0.6, 1.0};
constexpr double kNoiseFractions[] = {1.0, 0.5, 0.25, 0.1, 0.03, 0.01, 0.0};
constexpr double kJitter = 1e-6;

// Matern 5/2 of unit variance at distance r.
double Matern52(double r, double length_scale) {
  const double s = std::sqrt(5.0) * r / length_scale;
  return (1.0 + s + s * s / 3.0) * std::exp(-s);
}

double Distance(const Eigen::VectorXd& a, const Eigen::VectorXd& b) { return (a - b).norm(); }

Eigen::VectorXd ToVector(const std::vector<double>& x) {
  return Eigen::Map<const Eigen::VectorXd>(x.data(), static_cast<Eigen::Index>(x.size()));
}

}  // namespace

struct GaussianProcess::Model {
  Eigen::MatrixXd points;  // one point per column
  Eigen::LLT<Eigen::MatrixXd> llt;
  Eigen::VectorXd alpha;  // (K + noise I)^-1 y, standardised y
  double y_mean = 0;
  double y_scale = 1;
  double length_scale = kLengthScales[0];
  double noise = kJitter;

  Eigen::VectorXd KernelTo(const Eigen::VectorXd& x) const {
    Eigen::VectorXd k(points.cols());
    for (Eigen::Index i = 0; i < points.cols(); ++i) {
      k[i] = Matern52(Distance(points.col(i), x), length_scale);
    }
    return k;
  }
};

GaussianProcess::GaussianProcess(double noise) : noise_(std::max(noise, 0.0)) {}
GaussianProcess::~GaussianProcess() = default;
GaussianProcess::GaussianProcess(GaussianProcess&&) noexcept = default;
GaussianProcess& GaussianProcess::operator=(GaussianProcess&&) noexcept = default;

void GaussianProcess::Fit(const std::vector<std::vector<double>>& x, const std::vector<double>& y) {
  const Eigen::Index n = static_cast<Eigen::Index>(x.size());
  const Eigen::Index d = static_cast<Eigen::Index>(x[0].size());
  auto model = std::make_unique<Model>();
  model->points.resize(d, n);
  for (Eigen::Index i = 0; i < n; ++i) model->points.col(i) = ToVector(x[i]);

  const Eigen::VectorXd scores = ToVector(y);
  model->y_mean = scores.mean();
  const double variance = (scores.array() - model->y_mean).square().mean();
  // One sample, or all equal: nothing to scale by but the scores' magnitude.
  model->y_scale =
      variance > 0 ? std::sqrt(variance) : (model->y_mean != 0 ? std::abs(model->y_mean) : 1.0);
  const Eigen::VectorXd z = (scores.array() - model->y_mean) / model->y_scale;

  Eigen::MatrixXd distance(n, n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (Eigen::Index j = 0; j < n; ++j) {
      distance(i, j) = Distance(model->points.col(i), model->points.col(j));
    }
  }
  double best_likelihood = -std::numeric_limits<double>::infinity();
  for (double length_scale : kLengthScales) {
    const Eigen::MatrixXd kernel =
        distance.unaryExpr([&](double r) { return Matern52(r, length_scale); });
    for (double fraction : kNoiseFractions) {
      const double noise = fraction * noise_ + kJitter;
      Eigen::MatrixXd k = kernel;
      k.diagonal().array() += noise;
      Eigen::LLT<Eigen::MatrixXd> llt(k);
      if (llt.info() != Eigen::Success) continue;
      const Eigen::VectorXd alpha = llt.solve(z);
      // log p(z) = -z'a/2 - sum(log diag L) - n/2 log(2 pi); the constant does not matter.
      const double likelihood =
          -0.5 * z.dot(alpha) - llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
      if (likelihood > best_likelihood) {
        best_likelihood = likelihood;
        model->length_scale = length_scale;
        model->noise = noise;
        model->llt = std::move(llt);
        model->alpha = alpha;
      }
    }
  }
  model_ = std::move(model);
}

GaussianProcess::Prediction GaussianProcess::Predict(const std::vector<double>& x) const {
  const Eigen::VectorXd k = model_->KernelTo(ToVector(x));
  Prediction p;
  p.mean = model_->y_mean + model_->y_scale * k.dot(model_->alpha);
  const Eigen::VectorXd v = model_->llt.matrixL().solve(k);
  const double variance = std::max(0.0, 1.0 - v.squaredNorm());
  p.sd = model_->y_scale * std::sqrt(variance);
  return p;
}

double GaussianProcess::length_scale() const { return model_->length_scale; }
double GaussianProcess::noise() const { return model_->noise; }
double GaussianProcess::score_scale() const { return model_->y_scale; }

double ExpectedImprovement(const GaussianProcess::Prediction& p, double best, double xi) {
  const double gain = p.mean - best - xi;
  if (p.sd <= 0) return std::max(0.0, gain);
  const double z = gain / p.sd;
  const double cdf = 0.5 * std::erfc(-z / std::sqrt(2.0));
  const double pdf = std::exp(-0.5 * z * z) / std::sqrt(2.0 * M_PI);
  return gain * cdf + p.sd * pdf;
}

BayesianOptimizer::BayesianOptimizer(std::vector<bool> binary, BayesianOptimizerOptions options)
    : binary_(std::move(binary)), options_(options), rng_(options.seed) {
  const int d = dims();
  if (options_.initial_points <= 0) options_.initial_points = d + 1;
  // A Latin hypercube: in each dimension, one point per stratum of width 1/m.
  const int m = options_.initial_points - 1;
  design_.assign(static_cast<size_t>(std::max(m, 0)), std::vector<double>(d));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int j = 0; j < d; ++j) {
    std::vector<int> strata(static_cast<size_t>(m));
    std::iota(strata.begin(), strata.end(), 0);
    std::shuffle(strata.begin(), strata.end(), rng_);
    for (int i = 0; i < m; ++i) {
      const double t = (strata[i] + unit(rng_)) / m;
      design_[i][j] = binary_[j] ? (2 * strata[i] >= m ? 1.0 : 0.0) : t;
    }
  }
}

void BayesianOptimizer::AddSample(std::vector<double> x, double score) {
  points_.push_back(std::move(x));
  scores_.push_back(score);
}

std::vector<double> BayesianOptimizer::RandomPoint() {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<double> x(binary_.size());
  for (size_t j = 0; j < x.size(); ++j) {
    x[j] = unit(rng_);
    if (binary_[j]) x[j] = x[j] < 0.5 ? 0.0 : 1.0;
  }
  return x;
}

template <typename F>
std::vector<double> BayesianOptimizer::Refine(std::vector<double> x, double* value,
                                              const F& ei) const {
  for (double step = 0.1; step >= 0.01; step /= 2) {
    bool improved = true;
    while (improved) {
      improved = false;
      for (size_t j = 0; j < x.size(); ++j) {
        const std::vector<double> moves =
            binary_[j]
                ? std::vector<double>{1.0 - x[j]}
                : std::vector<double>{std::min(1.0, x[j] + step), std::max(0.0, x[j] - step)};
        for (double to : moves) {
          std::vector<double> y = x;
          y[j] = to;
          const double v = ei(y);
          if (v > *value) {
            *value = v;
            x = std::move(y);
            improved = true;
            break;
          }
        }
      }
    }
  }
  return x;
}

std::vector<double> BayesianOptimizer::NextSample() {
  const size_t n = points_.size();
  if (n == 0 && !design_.empty()) return design_[0];
  if (n == 0) return RandomPoint();
  if (n < static_cast<size_t>(options_.initial_points) && n - 1 < design_.size()) {
    return design_[n - 1];
  }
  GaussianProcess gp(options_.noise);
  gp.Fit(points_, scores_);
  double best = -std::numeric_limits<double>::infinity();
  for (const std::vector<double>& x : points_) best = std::max(best, gp.Predict(x).mean);
  const double xi = options_.xi * gp.score_scale();
  auto ei = [&](const std::vector<double>& x) {
    return ExpectedImprovement(gp.Predict(x), best, xi);
  };

  std::vector<std::pair<double, std::vector<double>>> candidates;
  const int count = std::max(options_.candidates, 1);
  candidates.reserve(static_cast<size_t>(count));
  for (int c = 0; c < count; ++c) {
    std::vector<double> x = RandomPoint();
    const double v = ei(x);
    candidates.emplace_back(v, std::move(x));
  }
  const size_t keep =
      std::min(candidates.size(), static_cast<size_t>(std::max(options_.refined, 1)));
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(keep),
                    candidates.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  double best_value = -1;
  std::vector<double> chosen;
  for (size_t c = 0; c < keep; ++c) {
    double value = candidates[c].first;
    std::vector<double> x = Refine(candidates[c].second, &value, ei);
    if (value > best_value) {
      best_value = value;
      chosen = std::move(x);
    }
  }
  return chosen;
}

int BayesianOptimizer::BestSample() const {
  const std::vector<int> order = SamplesByMean();
  return order.empty() ? -1 : order.front();
}

std::vector<int> BayesianOptimizer::SamplesByMean() const {
  if (points_.empty()) return {};
  GaussianProcess gp(options_.noise);
  gp.Fit(points_, scores_);
  std::vector<double> means(points_.size());
  for (size_t i = 0; i < points_.size(); ++i) means[i] = gp.Predict(points_[i]).mean;
  std::vector<int> order(points_.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return means[static_cast<size_t>(a)] > means[static_cast<size_t>(b)];
  });
  return order;
}

}  // namespace chorus::runtime
