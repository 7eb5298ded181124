// usage: consumer MODEL_DIR GRID.png -- four images of seed 1 in a 2 x 2 grid, as tarnn sample.
#include <tarnn/tarnn.h>

int main(int argc, char **argv) {
  if (argc != 3)
    return 2;
  tarnn::Engine engine(tarnn::load_model(argv[1]), tarnn::RunOptions{});
  const tarnn::ImageSet grid = tarnn::make_grid(tarnn::sample_images(engine, 4, /*seed=*/1), 2);
  tarnn::write_png(argv[2], grid.width, grid.height, grid.channels, grid.bytes.data());
}
